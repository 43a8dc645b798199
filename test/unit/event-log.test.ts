/** The coordinator's log lines: the info-only table agrees with the formatters. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CoreEvent } from '../../src/coordinator/core/types.js';
import { formatEvent } from '../../src/coordinator/observability/event-log.js';
import { isInfoOnly } from '../helpers/event-log.js';

/** One sample of every event type (both levels of worker.lost); the type makes it complete. */
const SAMPLES: { [K in CoreEvent['type']]: Extract<CoreEvent, { type: K }>[] } = {
  'worker.registered': [
    {
      type: 'worker.registered',
      workerId: 'w',
      capacity: 1,
      connId: 1,
      taskTypes: null,
      traceContext: false,
    },
  ],
  'worker.rejected': [{ type: 'worker.rejected', connId: 1, reason: 'r' }],
  'worker.suspected': [{ type: 'worker.suspected', workerId: 'w', silentMs: 1 }],
  'worker.lost': [
    { type: 'worker.lost', workerId: 'w', cause: 'drained', reason: 'r', runningJobs: 0 },
    { type: 'worker.lost', workerId: 'w', cause: 'heartbeat_timeout', reason: 'r', runningJobs: 1 },
  ],
  'worker.draining': [{ type: 'worker.draining', workerId: 'w', runningJobs: 0 }],
  'subscriber.dropped': [
    {
      type: 'subscriber.dropped',
      connId: 3,
      address: '10.0.0.7',
      stalledMs: 12_000,
      budget: 'total',
    },
  ],
  'worker.leasesKept': [
    { type: 'worker.leasesKept', workerId: 'w', jobs: 1, untilMs: 1, reason: 'connection closed' },
  ],
  'worker.leasesReclaimed': [{ type: 'worker.leasesReclaimed', workerId: 'w', connId: 2, jobs: 1 }],
  'worker.heldListEnded': [
    {
      type: 'worker.heldListEnded',
      workerId: 'w',
      connId: 2,
      listed: 3,
      revoked: 0,
      timedOut: false,
    },
    {
      type: 'worker.heldListEnded',
      workerId: 'w',
      connId: 2,
      listed: 1,
      revoked: 2,
      timedOut: true,
    },
  ],
  'job.submitted': [
    {
      type: 'job.submitted',
      jobId: 'j',
      state: 'QUEUED',
      taskType: 'SHA256',
      priority: 'NORMAL',
      maxAttempts: 3,
      idempotencyKey: null,
      queue: 'default',
      scheduleName: null,
      traceContext: null,
    },
  ],
  'job.deduplicated': [{ type: 'job.deduplicated', jobId: 'j', idempotencyKey: 'k' }],
  'job.attemptRequeued': [
    {
      type: 'job.attemptRequeued',
      jobId: 'j',
      workerId: 'w',
      attemptId: 'a',
      attempt: 2,
      requeues: 1,
      error: 'its task thread was ended for another attempt',
    },
  ],
  'schedule.fired': [{ type: 'schedule.fired', name: 's', jobId: 'j', tickMs: 1, lagMs: 2 }],
  'schedule.skipped': [{ type: 'schedule.skipped', name: 's', tickMs: 1, reason: 'overlap' }],
  'job.due': [{ type: 'job.due', jobId: 'j', lateMs: 3 }],
  'job.dedupMatched': [
    { type: 'job.dedupMatched', jobId: 'j', dedupKey: 'k', mode: 'active', replaced: false },
    { type: 'job.dedupMatched', jobId: 'j', dedupKey: 'k', mode: 'debounce', replaced: true },
  ],
  'job.signalled': [{ type: 'job.signalled', jobId: 'j', name: 'approve', resumed: true }],
  'job.resumed': [{ type: 'job.resumed', jobId: 'j', by: 'dtp.waitForSignal' }],
  'event.published': [{ type: 'event.published', eventId: 'e', name: 'paid', jobs: 1, resumed: 2 }],
  'job.debounced': [{ type: 'job.debounced', jobId: 'j', runAtMs: 5 }],
  'job.expired': [{ type: 'job.expired', jobId: 'j', from: 'QUEUED', expiresAtMs: 5 }],
  'job.rateLimited': [
    {
      type: 'job.rateLimited',
      jobId: 'j',
      workerId: 'w',
      attempt: 1,
      scope: 'group',
      untilMs: 9,
      inARow: 1,
    },
  ],
  'job.rejected': [{ type: 'job.rejected', activeCount: 1, limit: 1 }],
  'job.assigned': [
    {
      type: 'job.assigned',
      jobId: 'j',
      workerId: 'w',
      attempt: 1,
      maxAttempts: 3,
      attemptId: 'a',
      queuedMs: 1,
    },
  ],
  'job.retryScheduled': [
    {
      type: 'job.retryScheduled',
      jobId: 'j',
      attempt: 1,
      maxAttempts: 3,
      delayMs: 1,
      cause: 'task_failure',
      error: 'e',
    },
  ],
  'job.requeued': [{ type: 'job.requeued', jobId: 'j', attempts: 1 }],
  'job.released': [{ type: 'job.released', jobId: 'j' }],
  'job.suspended': [
    {
      type: 'job.suspended',
      jobId: 'j',
      workerId: 'w',
      attempt: 1,
      attemptId: 'a',
      untilMs: 5,
      waitingFor: null,
    },
  ],
  'job.completed': [
    { type: 'job.completed', jobId: 'j', workerId: 'w', attempt: 1, runMs: 1, endToEndMs: 2 },
  ],
  'job.failed': [{ type: 'job.failed', jobId: 'j', attempts: 3, cause: 'deadline', error: 'e' }],
  'job.cancelled': [{ type: 'job.cancelled', jobId: 'j', from: 'QUEUED' }],
  'job.deadlineExceeded': [
    { type: 'job.deadlineExceeded', jobId: 'j', workerId: 'w', attemptId: 'a', timeoutMs: 1 },
  ],
  'job.recovered': [{ type: 'job.recovered', jobId: 'j', from: 'RUNNING', to: 'QUEUED' }],
  'jobs.purged': [{ type: 'jobs.purged', deleted: 1, reason: 'retention' }],
  'coordinator.stalled': [{ type: 'coordinator.stalled', stalledMs: 5_000 }],
  'job.progress': [
    { type: 'job.progress', jobId: 'j', accepted: true, reason: null },
    { type: 'job.progress', jobId: 'j', accepted: false, reason: 'not the current lease' },
  ],
  'result.stale': [
    { type: 'result.stale', jobId: 'j', attemptId: 'a', workerId: 'w', reason: 'r' },
  ],
  'call.stale': [
    {
      type: 'call.stale',
      call: 'ENQUEUE_CHILD',
      jobId: 'j',
      attemptId: 'a',
      workerId: 'w',
      reason: 'r',
    },
  ],
};

describe('event log', () => {
  for (const samples of Object.values(SAMPLES)) {
    for (const event of samples) {
      it(`skips ${event.type} with info off only when its line is always info`, () => {
        const [level] = formatEvent(event);
        if (isInfoOnly(event)) assert.equal(level, 'info');
      });
    }
  }
});
