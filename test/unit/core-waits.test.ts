/**
 * Pending waits in the core: the two caps (per connection and in all) refuse
 * only the request that would pass them, with TOO_MANY_WAITS; a connection
 * that closes, or whose waits are released, leaves nothing behind; and the
 * wait table's indexes stay in step through every way a wait ends.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { WaitTable, type PendingWait } from '../../src/coordinator/core/wait-table.js';
import { CLIENT_CONN, CoreHarness, expectReply, repliesOf } from '../helpers/core-harness.js';

function harness(maxWaitsPerConnection: number, maxWaits: number): CoreHarness {
  return new CoreHarness({ config: { maxWaitsPerConnection, maxWaits } });
}

const wait = (jobId: string) => ({ type: 'WAIT_JOB', jobId, timeoutMillis: 60_000 }) as const;

describe('core: caps on pending waits', () => {
  it('refuses a wait beyond the cap of all connections, and only that request', () => {
    const h = harness(10, 3);
    const jobId = h.submit();
    for (let conn = 1; conn <= 3; conn++) assert.equal(h.request(wait(jobId), conn), undefined);
    const refused = expectReply(h.request(wait(jobId), 4), 'ERROR');
    assert.equal(refused.code, 'TOO_MANY_WAITS');
    assert.match(refused.message, /on this coordinator \(limit 3\)/);
    assert.equal(
      expectReply(h.request({ type: 'GET_JOB_STATUS', jobId }, 4), 'JOB_STATUS').job.jobId,
      jobId,
    );
    assert.equal(h.core.inspect().pendingWaits, 3);
    h.handle({ kind: 'clientClosed', connId: 1 });
    assert.equal(h.request(wait(jobId), 4), undefined, 'room again once a connection left');
  });

  it('names the connection cap when that is the one reached', () => {
    const h = harness(1, 100);
    const jobId = h.submit();
    assert.equal(h.request(wait(jobId)), undefined);
    const refused = expectReply(h.request(wait(jobId)), 'ERROR');
    assert.equal(refused.code, 'TOO_MANY_WAITS');
    assert.match(refused.message, /on this connection \(limit 1\)/);
  });

  it('answers the waits of a finished job once each and forgets them', () => {
    const h = harness(10, 10);
    h.register('w1', 1);
    const jobId = h.submit();
    h.request(wait(jobId), 1);
    h.request(wait(jobId), 2);
    const effects = h.result(jobId);
    assert.deepEqual(
      repliesOf(effects).map((r) => r.type),
      ['JOB_STATUS', 'JOB_STATUS'],
    );
    assert.equal(h.core.inspect().pendingWaits, 0);
  });
});

describe('core: releasing the waits of a connection', () => {
  it('answers every wait of that connection with its job as it is, and no other', () => {
    const h = harness(10, 10);
    const a = h.submit();
    const b = h.submit();
    h.request(wait(a), CLIENT_CONN, 1);
    h.request(wait(b), CLIENT_CONN, 2);
    h.request(wait(a), CLIENT_CONN + 1, 1);
    const effects = h.handle({ kind: 'releaseWaits', connId: CLIENT_CONN });
    const replies = effects.flatMap((e) => (e.kind === 'reply' ? [e] : []));
    assert.deepEqual(
      replies.map((r) => [r.connId, r.requestId, r.msg.type === 'JOB_STATUS' && r.msg.job.state]),
      [
        [CLIENT_CONN, 1, 'QUEUED'],
        [CLIENT_CONN, 2, 'QUEUED'],
      ],
    );
    assert.equal(h.core.inspect().pendingWaits, 1, 'the other connection keeps its wait');
    assert.deepEqual(h.handle({ kind: 'waitExpired', connId: CLIENT_CONN, requestId: 1 }), []);
  });
});

describe('WaitTable', () => {
  it('keeps its indexes in step whichever way waits end', () => {
    const op = fc.oneof(
      fc.record({
        kind: fc.constant('add' as const),
        conn: fc.nat(3),
        req: fc.nat(5),
        job: fc.nat(3),
      }),
      fc.record({ kind: fc.constant('take' as const), conn: fc.nat(3), req: fc.nat(5) }),
      fc.record({ kind: fc.constant('job' as const), job: fc.nat(3) }),
      fc.record({ kind: fc.constant('drop' as const), conn: fc.nat(3) }),
      fc.record({ kind: fc.constant('release' as const), conn: fc.nat(3) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const table = new WaitTable();
        const model = new Map<string, PendingWait>();
        const key = (conn: number, req: number): string => `${conn}/${req}`;
        for (const o of ops) {
          switch (o.kind) {
            case 'add': {
              const w = { jobId: `j${o.job}`, connId: o.conn, requestId: o.req };
              table.add(w, null);
              model.set(key(o.conn, o.req), w);
              break;
            }
            case 'take':
              assert.equal(table.take(o.conn, o.req), model.get(key(o.conn, o.req)));
              model.delete(key(o.conn, o.req));
              break;
            case 'job': {
              const taken = table.takeForJob(`j${o.job}`);
              const expected = [...model.values()].filter((w) => w.jobId === `j${o.job}`);
              assert.deepEqual(new Set(taken), new Set(expected));
              for (const w of expected) model.delete(key(w.connId, w.requestId));
              break;
            }
            case 'drop':
            case 'release': {
              const expected = [...model.values()].filter((w) => w.connId === o.conn);
              if (o.kind === 'drop') table.dropConnection(o.conn);
              else assert.deepEqual(new Set(table.takeConnection(o.conn)), new Set(expected));
              for (const w of expected) model.delete(key(w.connId, w.requestId));
              break;
            }
          }
          assert.equal(table.size, model.size);
          for (let conn = 0; conn <= 3; conn++) {
            const count = [...model.values()].filter((w) => w.connId === conn).length;
            assert.equal(table.countFor(conn), count);
          }
        }
      }),
    );
  });
});

describe('core: a wait for a job that ended a moment ago', () => {
  it('is answered from memory, with the snapshot a read of the store gives', () => {
    const h = harness(10, 10);
    h.register('w1', 1);
    const jobId = h.submit();
    h.result(jobId);
    h.holdReads = true;
    const remembered = expectReply(h.request(wait(jobId)), 'JOB_STATUS');
    assert.equal(h.heldReads.length, 0, 'the wait read nothing');
    assert.equal(remembered.job.state, 'COMPLETED');
    // A status reads the store (the job left memory): the same snapshot.
    assert.equal(h.request({ type: 'GET_JOB_STATUS', jobId }), undefined);
    assert.equal(h.heldReads.length, 1, 'the job left memory: a status reads the store');
    const effects = h.answerHeldReads();
    const [stored] = repliesOf(effects);
    assert.ok(stored?.type === 'JOB_STATUS');
    assert.deepEqual(remembered.job, stored.job);
  });

  it('is forgotten by a purge that deleted rows: the job is then unknown', () => {
    const h = harness(10, 10);
    h.register('w1', 1);
    const jobId = h.submit();
    h.result(jobId);
    h.tick(10);
    const purged = expectReply(
      h.request({ type: 'PURGE_JOBS', state: 'COMPLETED', olderThanMillis: 0 }),
      'JOBS_PURGED',
    );
    assert.equal(purged.deleted, 1);
    const unknown = expectReply(h.request(wait(jobId)), 'ERROR');
    assert.equal(unknown.code, 'UNKNOWN_JOB');
  });
});
