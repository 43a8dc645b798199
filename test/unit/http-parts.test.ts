/**
 * The HTTP side's small mechanisms on their own: durations as people write
 * them, the charts' ring of buckets, sessions (expiry, eviction, rotation),
 * and which core events become live job changes.
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { formatDurationMs, parseDuration } from '../../src/client/duration.js';
import { ActivityLog, BUCKETS, BUCKET_MS } from '../../src/http/activity.js';
import { jobChange } from '../../src/http/live.js';
import {
  MAX_SESSIONS,
  SESSION_TTL_MS,
  SessionStore,
  bearerToken,
} from '../../src/http/sessions.js';

function request(headers: Record<string, string>): IncomingMessage {
  return { headers } as unknown as IncomingMessage;
}

describe('parseDuration', () => {
  it('reads a whole number and a unit', () => {
    assert.deepEqual(parseDuration('500ms'), { ms: 500 });
    assert.deepEqual(parseDuration('30s'), { ms: 30_000 });
    assert.deepEqual(parseDuration('30m'), { ms: 1_800_000 });
    assert.deepEqual(parseDuration('12h'), { ms: 43_200_000 });
    assert.deepEqual(parseDuration(' 7d '), { ms: 604_800_000 });
    assert.deepEqual(parseDuration('0ms'), { ms: 0 });
  });

  it('refuses a bare number, other units, fractions, signs and absurd lengths', () => {
    for (const text of ['7', '7 d', '1.5h', '-1d', '7w', '', 'd', '36501d']) {
      assert.ok('error' in parseDuration(text), text);
    }
  });

  it('formats durations for people', () => {
    assert.equal(formatDurationMs(850), '850 ms');
    assert.equal(formatDurationMs(1_234), '1.23 s');
    assert.equal(formatDurationMs(90_000), '1.5 min');
  });
});

describe('ActivityLog', () => {
  it('counts events in the bucket of their time and keeps one hour', () => {
    const start = 1_000 * BUCKET_MS;
    const log = new ActivityLog(start);
    log.record('completed', start);
    log.record('completed', start + 1);
    log.record('failed', start + BUCKET_MS);
    const series = log.series(start + BUCKET_MS);
    assert.equal(series.buckets.length, BUCKETS);
    assert.deepEqual(
      series.buckets.slice(-2).map((b) => [b.completed, b.failed]),
      [
        [2, 0],
        [0, 1],
      ],
    );
    assert.equal(series.startMillis, start + BUCKET_MS - (BUCKETS - 1) * BUCKET_MS);
    assert.deepEqual(series.totals, {
      submitted: 0,
      completed: 2,
      failed: 1,
      cancelled: 0,
      retried: 0,
    });
  });

  it('forgets buckets older than an hour, also after a long silence', () => {
    const start = 5_000 * BUCKET_MS;
    const log = new ActivityLog(start);
    log.record('submitted', start);
    const later = log.series(start + (BUCKETS - 1) * BUCKET_MS);
    assert.equal(later.buckets[0]?.submitted, 1, 'still inside the hour');
    const gone = log.series(start + BUCKETS * BUCKET_MS);
    assert.ok(gone.buckets.every((b) => b.submitted === 0));
    const muchLater = log.series(start + 100 * BUCKETS * BUCKET_MS);
    assert.ok(muchLater.buckets.every((b) => b.submitted === 0));
    assert.equal(muchLater.totals.submitted, 1, 'totals are since the start');
  });
});

describe('SessionStore', () => {
  it('opens sessions for valid tokens only and checks the token again on use', () => {
    const tokens = new Set(['a']);
    let now = 0;
    const sessions = new SessionStore(
      (t) => tokens.has(t),
      () => now,
    );
    assert.equal(sessions.open('b'), null);
    const session = sessions.open('a');
    assert.ok(session !== null);
    const withCookie = request({ cookie: `other=1; dtp_session=${session.id}` });
    assert.equal(sessions.authorizes(withCookie), true);
    tokens.delete('a');
    assert.equal(sessions.authorizes(withCookie), false, 'a removed token ends its sessions');
    tokens.add('a');
    assert.equal(sessions.authorizes(withCookie), false, 'and they stay ended');
    const next = sessions.open('a');
    assert.ok(next !== null);
    now = SESSION_TTL_MS;
    assert.equal(
      sessions.authorizes(request({ cookie: `dtp_session=${next.id}` })),
      false,
      'expired',
    );
  });

  it('keeps at most MAX_SESSIONS, dropping the oldest', () => {
    const sessions = new SessionStore(() => true);
    const first = sessions.open('t');
    assert.ok(first !== null);
    for (let i = 0; i < MAX_SESSIONS; i++) sessions.open('t');
    assert.equal(sessions.authorizes(request({ cookie: `dtp_session=${first.id}` })), false);
  });

  it('reads bearer tokens, and allows everything without tokens', () => {
    assert.equal(bearerToken(request({ authorization: 'Bearer abc' })), 'abc');
    assert.equal(bearerToken(request({ authorization: 'bearer  abc ' })), 'abc');
    assert.equal(bearerToken(request({ authorization: 'Basic abc' })), null);
    const open = new SessionStore(null);
    assert.equal(open.required, false);
    assert.equal(open.authorizes(request({})), true);
  });
});

describe('live job changes', () => {
  it('maps job events to the state they leave the job in', () => {
    assert.deepEqual(
      jobChange({
        type: 'job.submitted',
        jobId: 'j',
        taskType: 'T',
        priority: 'HIGH',
        maxAttempts: 1,
        idempotencyKey: null,
      }),
      { jobId: 'j', state: 'QUEUED', taskType: 'T' },
    );
    assert.deepEqual(
      jobChange({ type: 'job.failed', jobId: 'j', attempts: 1, cause: 'task_failure', error: 'x' }),
      { jobId: 'j', state: 'FAILED' },
    );
    assert.deepEqual(
      jobChange({ type: 'job.recovered', jobId: 'j', from: 'RUNNING', to: 'QUEUED' }),
      {
        jobId: 'j',
        state: 'QUEUED',
      },
    );
    assert.equal(jobChange({ type: 'coordinator.stalled', stalledMs: 5 }), null);
    assert.equal(jobChange({ type: 'job.deduplicated', jobId: 'j', idempotencyKey: 'k' }), null);
  });
});
