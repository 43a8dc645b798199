/**
 * What a coordinator tells operators about its place among several: its
 * role, the epoch of the lease it knows of, and where the leader is.
 */
import type { CoreInspection } from '../core/core.js';

export interface RoleStatus {
  /** `leader` serves (a lone SQLite coordinator always does); `standby` waits for the lease. */
  role: 'leader' | 'standby';
  /** The leader's epoch (fencing token); null without leadership (SQLite) or while unknown. */
  epoch: number | null;
  /** The leader's client and worker `host:port`; null when unknown or without leadership. */
  leaderClient: string | null;
  leaderWorker: string | null;
}

/** What a standby's inspect() shows: it holds no jobs and no workers. */
export const EMPTY_INSPECTION: CoreInspection = Object.freeze({
  activeCount: 0,
  activeByState: {},
  queuedByTaskType: new Map<string, number>(),
  queuedByPriority: { HIGH: 0, NORMAL: 0, LOW: 0 },
  workers: [],
  servedTaskTypes: [],
  freeSlots: 0,
  subscriptions: 0,
  subscribers: 0,
  stalledSubscribers: 0,
  keptLeases: [],
  pendingWaits: 0,
  pendingReads: 0,
  scheduledCount: 0,
  farScheduledCount: 0,
  scheduledHorizon: { atMs: Infinity, seq: Number.MAX_SAFE_INTEGER },
  wakeArmedAtMs: null,
  shardLinks: { applied: 0, watched: 0 },
  queues: [],
});
