/**
 * Deduplication, expiry and handler rate limits with real coordinators,
 * workers and clients, on SQLite and on PostgreSQL: a racing pair of
 * submissions from two connections makes one job; an expired job and its
 * dependent end cancelled; a debounced job runs once with the last payload;
 * a queue a handler held stays held across a coordinator restart, and its
 * job then runs with its one counted attempt.
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, afterEach, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import { createTestDatabase, dropTestDatabase, postgresSkip } from '../helpers/postgres.js';
import {
  startCoordinator,
  startTaskWorker,
  tempDir,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const IO_TASKS = fileURLToPath(new URL('../fixtures/io-tasks.js', import.meta.url));

const STORES: { name: string; skip: string | false; database: () => Promise<string> }[] = [];
const temp = tempDir('dtp-dedup-');
let files = 0;
STORES.push({
  name: 'SQLite',
  skip: false,
  database: () => Promise.resolve(`${temp.dir}/db-${++files}.sqlite`),
});
STORES.push({ name: 'PostgreSQL', skip: postgresSkip(), database: createTestDatabase });

for (const store of STORES) {
  describe(`deduplication, expiry and rate limits on ${store.name}`, { skip: store.skip }, () => {
    const closers: (() => Promise<unknown>)[] = [];
    const databases: string[] = [];
    afterEach(async () => {
      for (const close of closers.splice(0).reverse()) await close();
    });
    after(async () => {
      if (store.name === 'PostgreSQL') for (const url of databases) await dropTestDatabase(url);
      else temp.remove();
    });

    async function database(): Promise<string> {
      const path = await store.database();
      databases.push(path);
      return path;
    }

    async function coordinator(databasePath: string, ports = {}): Promise<TestCoordinator> {
      const tc = await startCoordinator({ databasePath, ...ports });
      closers.push(() => tc.close());
      return tc;
    }

    async function client(tc: TestCoordinator): Promise<DtpClient> {
      const c = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
      closers.push(() => c.close());
      return c;
    }

    it('a racing pair from two connections makes one job (active)', async () => {
      const tc = await coordinator(await database());
      const [a, b] = [await client(tc), await client(tc)];
      const handles = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          (i % 2 === 0 ? a : b).submit('SLEEP', { durationMillis: 1 }, { dedupKey: 'sync-1' }),
        ),
      );
      assert.equal(new Set(handles.map((h) => h.jobId)).size, 1);
      assert.equal(handles.filter((h) => !h.deduplicated).length, 1);
      assert.equal((await a.status(handles[0]?.jobId as string)).dedupKey, 'sync-1');
    });

    it('an expired job and its dependent end cancelled; nothing runs them', async () => {
      const tc = await coordinator(await database());
      const c = await client(tc);
      const parent = await c.submit(
        'SLEEP',
        { durationMillis: 1 },
        { expiresAtMillis: Date.now() + 1_500, queue: 'nobody-serves' },
      );
      const child = await c.submit('SLEEP', { durationMillis: 1 }, { dependsOn: [parent.jobId] });
      const ended = await c.wait(parent.jobId, 5_000);
      assert.equal(ended.state, 'CANCELLED');
      assert.equal(ended.expired, true);
      assert.match(ended.error ?? '', /^EXPIRED: /);
      assert.equal((await c.wait(child.jobId, 5_000)).state, 'CANCELLED');
    });

    it('a debounced job runs once, with the last payload', async () => {
      const tc = await coordinator(await database());
      const c = await client(tc);
      const w = await startTaskWorker(tc.coordinator.workerPort, 'w1', {
        capacity: 4,
        tasks: [IO_TASKS],
      });
      closers.push(() => w.close());
      // Each submission sets the run time anew: the last one's short delay is the one that counts.
      const submit = (text: string, delayMs: number) =>
        c.submit('io.echo', { text }, { dedupKey: 'doc-9', dedupMode: 'debounce', delayMs });
      const first = await submit('one', 60_000);
      const second = await submit('two', 60_000);
      const third = await submit('three', 100);
      assert.deepEqual(
        [second.jobId, third.jobId, second.replaced, third.replaced],
        [first.jobId, first.jobId, true, true],
      );
      const done = await c.wait(first.jobId, 5_000);
      assert.equal(done.state, 'COMPLETED');
      assert.match(done.result ?? '', /three/);
      assert.equal(done.attempts, 1);
    });

    it('a queue a handler held stays held across a restart; the job then runs', async () => {
      const db = await database();
      let tc = await coordinator(db);
      let c = await client(tc);
      const w = await startTaskWorker(tc.coordinator.workerPort, 'w1', {
        capacity: 2,
        tasks: [IO_TASKS],
      });
      closers.push(() => w.close());
      const limited = await c.submit(
        'io.limitedFirst',
        { retryAfterMs: 1_500, scope: 'queue' },
        { queue: 'api', maxAttempts: 1 },
      );
      const held = await until(async () => {
        const q = (await c.queues.list()).find((info) => info.name === 'api');
        return q?.rateLimitedUntilMillis ?? undefined;
      });
      const ports = {
        workerPort: tc.coordinator.workerPort,
        clientPort: tc.coordinator.clientPort,
      };
      await c.close();
      await tc.close();
      tc = await coordinator(db, ports);
      c = await client(tc);
      const after = (await c.queues.list()).find((info) => info.name === 'api');
      assert.equal(after?.rateLimitedUntilMillis, held, 'the hold is durable');
      const other = await c.submit('io.wait', { ms: 1 }, { queue: 'api' });
      assert.equal((await c.status(other.jobId)).state, 'QUEUED');
      const done = await c.wait(limited.jobId, 10_000);
      assert.equal(done.state, 'COMPLETED');
      assert.ok((done.startedAtMillis ?? 0) >= held, 'not started before the hold ended');
      const otherDone = await c.wait(other.jobId, 10_000);
      assert.ok((otherDone.startedAtMillis ?? 0) >= held);
      const attempts = (await c.status(limited.jobId, { attempts: true })).attempts ?? [];
      assert.deepEqual(
        attempts.map((a) => a.outcome),
        ['RATE_LIMITED', 'SUCCEEDED'],
      );
      assert.equal(done.rateLimited, 1);
      await c.close();
      await tc.close();
      tc = await coordinator(db, ports);
      c = await client(tc);
      const stored = await c.status(limited.jobId); // ended before the start: the store's row
      assert.deepEqual([stored.attempts, stored.rateLimited], [2, 1], 'counted by the store too');
    });
  });
}
