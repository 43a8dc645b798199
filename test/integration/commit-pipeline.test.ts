/**
 * The shell's commit pipeline with a store whose commits finish when the test
 * says: replies wait for their own batch, later batches are built meanwhile
 * and leave in order; a failed commit answers every open request (pending
 * waits included) with the fail-stop error.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { Store, WriteBatch } from '../../src/store/store.js';
import { RawClient } from '../helpers/raw-peers.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

/** A MemoryStore whose commits wait in a queue until released (or failed). */
class GatedStore extends MemoryStore {
  readonly waiting: { batch: WriteBatch; release: () => void; fail: (err: Error) => void }[] = [];
  gated = false;

  override commit(batch: WriteBatch): Promise<void> {
    if (!this.gated) return super.commit(batch);
    return new Promise((resolve, reject) => {
      this.waiting.push({
        batch,
        release: () => {
          this.commitNow(batch);
          resolve();
        },
        fail: reject,
      });
    });
  }

  /** Releases the oldest waiting commit. */
  releaseOne(): void {
    const next = this.waiting.shift();
    assert.ok(next !== undefined, 'no commit is waiting');
    next.release();
  }
}

const SUBMIT = {
  type: 'SUBMIT_JOB',
  taskType: 'SHA256',
  maxAttempts: null,
  idempotencyKey: null,
  priority: null,
} as const;

describe('commit pipeline', () => {
  let tc: TestCoordinator | null = null;
  const peers: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    await Promise.all(peers.splice(0).map((p) => p.close()));
    await tc?.close();
    tc = null;
  });

  async function start(store: Store): Promise<RawClient> {
    tc = await startCoordinator({}, { store });
    const c = await RawClient.connect(tc.coordinator.clientPort);
    peers.push(c);
    return c;
  }

  it('releases each reply only after its own batch commits, in order, while the next is built', async () => {
    const store = new GatedStore();
    const c = await start(store);
    store.gated = true;
    c.conn.send({ ...SUBMIT, payload: { text: 'first' } });
    await until(() => store.waiting.length === 1, { timeoutMs: 5_000 });
    c.conn.send({ ...SUBMIT, payload: { text: 'second' } });
    await until(() => store.waiting.length === 2, { timeoutMs: 5_000 });
    assert.equal(c.inbox.size, 0, 'nothing leaves before its commit');
    assert.equal(store.committedJobs().length, 0);
    store.releaseOne();
    const first = await c.inbox.next(5_000);
    assert.equal(first.type, 'JOB_SUBMITTED');
    assert.equal(c.inbox.size, 0, 'the second waits for its own commit');
    store.releaseOne();
    const second = await c.inbox.next(5_000);
    assert.equal(second.type, 'JOB_SUBMITTED');
    assert.equal(store.committedJobs().length, 2);
  });

  it('answers every open request, waits included, with STORE_FAILED when a commit fails', async () => {
    const store = new GatedStore();
    const c = await start(store);
    const jobId = await c.submit('SHA256', { text: 'waited for' });
    const waits = [c.request({ type: 'WAIT_JOB', jobId, timeoutMillis: 60_000 })];
    waits.push(c.request({ type: 'WAIT_JOB', jobId, timeoutMillis: 60_000 }));
    store.gated = true;
    const doomed = c.request({ ...SUBMIT, payload: { text: 'never stored' } });
    await until(() => store.waiting.length === 1, { timeoutMs: 5_000 });
    store.waiting.shift()?.fail(new Error('SQLITE_IOERR: disk I/O error'));
    for (const reply of await Promise.all([...waits, doomed])) {
      assert.equal(reply.type, 'ERROR');
      if (reply.type === 'ERROR') assert.equal(reply.code, 'STORE_FAILED');
    }
    const later = await c.request({ type: 'LIST_WORKERS' });
    assert.ok(later.type === 'ERROR' && later.code === 'STORE_FAILED');
  });

  it('releases nothing of a batch still committing once the core has thrown (INTERNAL_ERROR)', async () => {
    const store = new GatedStore();
    let broken = false;
    const now = (): number => {
      if (broken) throw new Error('the clock broke');
      return Date.now();
    };
    tc = await startCoordinator({}, { store, now });
    const fatal = new Promise<Error>((resolve) => tc?.coordinator.events.once('fatal', resolve));
    const c = await RawClient.connect(tc.coordinator.clientPort);
    peers.push(c);
    store.gated = true;
    const first = c.request({ ...SUBMIT, payload: { text: 'committing when the core throws' } });
    await until(() => store.waiting.length === 1, { timeoutMs: 5_000 });
    broken = true; // the next input (a sweep tick at the latest) throws inside the core
    assert.match((await fatal).message, /the clock broke/);
    const reply = await first;
    assert.ok(reply.type === 'ERROR' && reply.code === 'INTERNAL_ERROR', JSON.stringify(reply));
    store.releaseOne();
    await until(() => store.committedJobs().length === 1, { timeoutMs: 5_000 });
    const later = await c.request({ type: 'LIST_WORKERS' });
    assert.ok(later.type === 'ERROR' && later.code === 'INTERNAL_ERROR', JSON.stringify(later));
    assert.equal(c.inbox.size, 0, 'the committed batch released nothing');
    assert.equal(tc.coordinator.failure?.code, 'INTERNAL_ERROR');
  });

  it('answers a malformed frame after a fail-stop with an error and closes', async () => {
    const store = new GatedStore();
    const c = await start(store);
    store.failCommits('disk full');
    const reply = await c.request({ ...SUBMIT, payload: { text: 'x' } });
    assert.ok(reply.type === 'ERROR' && reply.code === 'STORE_FAILED');
    c.conn.sendFrame(Buffer.from([0, 0, 0, 3, 0x7b, 0x7b, 0x7b]));
    const malformed = await c.inbox.next(5_000);
    assert.ok(malformed.type === 'ERROR' && malformed.code === 'MALFORMED_REQUEST');
    await c.conn.closed();
  });
});
