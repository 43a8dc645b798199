/**
 * The HTTP side's small mechanisms on their own: durations as people write
 * them, the charts' ring of buckets, sessions (expiry, eviction, rotation),
 * and which core events become live job changes.
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { formatDurationMs, parseDuration } from '../../src/protocol/duration.js';
import { ActivityLog, BUCKETS, BUCKET_MS } from '../../src/http/activity.js';
import { jobChange } from '../../src/http/live.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { AccessControl } from '../../src/coordinator/ports/access.js';
import { DEFAULT_SESSION_TTL_MS, HttpAuth, MAX_SESSIONS } from '../../src/http/http-auth.js';

function request(headers: Record<string, string>): IncomingMessage {
  return {
    headers,
    socket: { remoteAddress: '127.0.0.1', remotePort: 1 },
  } as unknown as IncomingMessage;
}

const dir = mkdtempSync(join(tmpdir(), 'dtp-http-parts-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** An HttpAuth over a token file holding `tokens`; `write` rewrites the file and reloads. */
function authWith(tokens: string[], now: () => number = Date.now) {
  const path = join(dir, `tokens-${Math.random().toString(36).slice(2)}`);
  writeFileSync(path, tokens.join('\n'));
  const access = new AccessControl({ clientTokenFile: path });
  const refusals: string[] = [];
  const auth = new HttpAuth(access, {
    secureCookie: false,
    now,
    onRefused: (_remote, reason) => refusals.push(reason),
  });
  const write = (next: string[]): void => {
    writeFileSync(path, next.join('\n'));
    access.reload();
  };
  return { auth, write, refusals };
}

/** The `dtp_session=<id>` part of a Set-Cookie value. */
function cookieOf(setCookie: string | null): string {
  assert.ok(setCookie !== null && setCookie !== '');
  return setCookie.split(';')[0] as string;
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

describe('HTTP sessions', () => {
  it('opens sessions for listed tokens only and checks the token again on use', () => {
    let now = 0;
    const { auth, write, refusals } = authWith(['a', 'x'], () => now);
    assert.equal(auth.openSession(request({}), 'b'), null);
    assert.deepEqual(refusals, ['token refused']);
    const cookie = cookieOf(auth.openSession(request({}), 'a'));
    const withCookie = request({ cookie: `other=1; ${cookie}` });
    assert.equal(auth.authorize(withCookie), true);
    write(['x']);
    assert.equal(auth.authorize(withCookie), false, 'a removed token ends its sessions');
    write(['a', 'x']);
    assert.equal(auth.authorize(withCookie), false, 'and they stay ended');
    const next = cookieOf(auth.openSession(request({}), 'a'));
    now = DEFAULT_SESSION_TTL_MS;
    assert.equal(auth.authorize(request({ cookie: next })), false, 'expired');
  });

  it('keeps at most MAX_SESSIONS, dropping the oldest', () => {
    const { auth } = authWith(['t']);
    const first = cookieOf(auth.openSession(request({}), 't'));
    for (let i = 0; i < MAX_SESSIONS; i++) auth.openSession(request({}), 't');
    assert.equal(auth.sessionCount, MAX_SESSIONS);
    assert.equal(auth.authorize(request({ cookie: first })), false);
  });

  it('reads bearer tokens, and allows everything without tokens', () => {
    const { auth } = authWith(['abc']);
    assert.equal(auth.authorize(request({ authorization: 'Bearer abc' })), true);
    assert.equal(auth.authorize(request({ authorization: 'bearer  abc ' })), true);
    assert.equal(auth.authorize(request({ authorization: 'Basic abc' })), false);
    const open = new HttpAuth(new AccessControl(), { secureCookie: false });
    assert.equal(open.required, false);
    assert.equal(open.authorize(request({})), true);
    assert.equal(open.openSession(request({}), null), '', 'nothing to open');
  });
});

describe('live job changes', () => {
  it('maps job events to the state they leave the job in', () => {
    assert.deepEqual(
      jobChange({
        type: 'job.submitted',
        jobId: 'j',
        state: 'SCHEDULED',
        taskType: 'T',
        priority: 'HIGH',
        maxAttempts: 1,
        idempotencyKey: null,
        queue: 'default',
        scheduleName: null,
        traceContext: null,
      }),
      { jobId: 'j', state: 'SCHEDULED', taskType: 'T' },
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
