/**
 * The extensions this coordinator offers its workers, listed in every
 * `WORKER_REGISTERED.features` (see src/protocol/features.ts for the names
 * and the negotiation rule). One list, so the reply, the start-up log line
 * and the docs cannot disagree.
 */
import type { Feature } from '../../protocol/features.js';

export const COORDINATOR_FEATURES: readonly Feature[] = [
  'drain',
  'taskTypes',
  'retryable',
  'assignLimits',
  'heartbeatAck',
  'prefetch',
  'reattach',
  'queues',
  'parents',
  'progress',
  'children',
  'steps',
  'slots',
  'requeue',
  'moreHeld',
  'batches',
  'rateLimits',
  'signals',
];
