/**
 * The client library against sharded coordinators (PostgreSQL, in-process):
 * given one coordinator's address, it sends each request about one queue or
 * job straight to that shard's own client port, so that the coordinator it
 * dialled routes none of them (ShardedCoordinator.routed() counts what its
 * client port sent to a shard); a shard whose leader stops mid-run loses
 * nothing; with `shardRouting: false` everything goes through the
 * coordinator dialled, as before.
 */
import assert from 'node:assert/strict';
import { after, afterEach, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/client.js';
import { FeatureCache } from '../../src/client/negotiation.js';
import { ShardedCoordinator } from '../../src/server/sharding/sharded-coordinator.js';
import { shardOfJobId } from '../../src/protocol/shards.js';
import { createTestDatabase, dropTestDatabase, postgresSkip } from '../helpers/postgres.js';
import { queuesByShard, sharedOut, shardedOptions } from '../helpers/sharded.js';
import { until } from '../helpers/until.js';

const skip = postgresSkip();
const SHARDS = 4;
const QUEUES = queuesByShard(SHARDS);
const databases: string[] = [];
let running: { close(): Promise<void> }[] = [];

after(async () => {
  for (const url of databases) await dropTestDatabase(url);
});
afterEach(async () => {
  await Promise.all(running.map((c) => c.close()));
  running = [];
});

/** Two coordinators sharing the shards out. */
async function twoCoordinators(): Promise<[ShardedCoordinator, ShardedCoordinator]> {
  const url = await createTestDatabase();
  databases.push(url);
  const a = await ShardedCoordinator.start(shardedOptions(url), SHARDS);
  running.push(a);
  const b = await ShardedCoordinator.start(shardedOptions(url), SHARDS);
  running.push(b);
  await sharedOut([a, b], SHARDS);
  return [a, b];
}

/** A client of `c`'s client port only, with a feature cache of its own. */
async function clientOf(c: ShardedCoordinator, shardRouting?: boolean): Promise<DtpClient> {
  const client = await DtpClient.connect({
    host: '127.0.0.1',
    port: c.clientPort,
    featureCache: new FeatureCache(),
    ...(shardRouting !== undefined && { shardRouting }),
  });
  running.push(client);
  return client;
}

/** What `c`'s client port sent to shards, local and forwarded together. */
function routedBy(c: ShardedCoordinator): number {
  const { local, forwarded } = c.routed();
  return local + forwarded;
}

/**
 * One job per shard, cancelled and waited for (the first wait probes the
 * coordinator and learns its shards); then status reads of each until a
 * whole round went to the shards directly (each shard's connection is
 * dialled in the background the first time a request is for it).
 */
async function warmUp(client: DtpClient, via: ShardedCoordinator): Promise<string[]> {
  const ids: string[] = [];
  for (const queue of QUEUES) {
    const { jobId } = await client.submit('ECHO', {}, { queue });
    await client.cancel(jobId);
    assert.equal((await client.wait(jobId, 5_000)).state, 'CANCELLED');
    ids.push(jobId);
  }
  await until(
    async () => {
      const before = routedBy(via);
      for (const id of ids) await client.status(id);
      return routedBy(via) === before;
    },
    { what: 'a round of reads that reached every shard directly', timeoutMs: 10_000 },
  );
  return ids;
}

describe('the client library, sharded', { skip }, () => {
  it('sends requests about one queue or job straight to its shard', async () => {
    const [a] = await twoCoordinators();
    const client = await clientOf(a);
    await warmUp(client, a);
    const before = a.routed();
    const ids: string[] = [];
    for (const [shard, queue] of QUEUES.entries()) {
      const handle = await client.submit('ECHO', { shard }, { queue, idempotencyKey: `k${shard}` });
      assert.equal(shardOfJobId(handle.jobId, SHARDS), shard);
      ids.push(handle.jobId);
    }
    const batch = await client.submitMany(
      [1, 2, 3].map((i) => ({ taskType: 'ECHO', payload: { i }, queue: QUEUES[2] as string })),
    );
    assert.ok(batch.every((id) => shardOfJobId(id, SHARDS) === 2));
    for (const [shard, id] of ids.entries()) {
      assert.equal((await client.status(id)).queue, QUEUES[shard]);
      const page = await client.listPage({ queue: QUEUES[shard] as string, limit: 10 });
      assert.ok(page.jobs.some((job) => job.jobId === id));
      assert.equal((await client.cancel(id)).cancelled, true);
      assert.equal((await client.wait(id, 5_000)).state, 'CANCELLED');
    }
    await client.queues.pause(QUEUES[1] as string);
    assert.deepEqual(a.routed(), before, 'the coordinator dialled sent nothing to a shard');
    // The map says how long each leader's lease had left (1 s leases here).
    for (const info of (await client.shards()).shards) {
      const left = info.leaseLeftMillis ?? 0;
      assert.ok(left > 0 && left <= 1_000, `shard ${info.shard}: ${left} ms`);
    }
    // Requests about every queue still go through it, and see what the shards did.
    const listed = await client.queues.list();
    assert.equal(listed.find((q) => q.name === QUEUES[1])?.paused, true);
    assert.ok(routedBy(a) > before.local + before.forwarded);
  });

  it('goes through the coordinator dialled, as before, with shardRouting false', async () => {
    const [a] = await twoCoordinators();
    const client = await clientOf(a, false);
    const before = a.routed();
    for (const queue of QUEUES) {
      const { jobId } = await client.submit('ECHO', {}, { queue });
      await client.cancel(jobId);
      assert.equal((await client.wait(jobId, 5_000)).state, 'CANCELLED');
    }
    const after = a.routed();
    // Three requests per shard at least (the probes too); those of the other coordinator's forwarded.
    assert.ok(after.local + after.forwarded - before.local - before.forwarded >= 3 * SHARDS);
    assert.ok(after.forwarded - before.forwarded >= 3 * (SHARDS / 2));
  });

  it('loses nothing when the leader of routed shards stops mid-run', async () => {
    const [a, b] = await twoCoordinators();
    const client = await clientOf(a);
    await warmUp(client, a);
    const acknowledged = new Map<string, string>();
    const submit = async (i: number): Promise<void> => {
      const queue = QUEUES[i % SHARDS] as string;
      const key = `run-${i}`;
      const handle = await client.submit('ECHO', { i }, { queue, idempotencyKey: key, retries: 5 });
      acknowledged.set(key, handle.jobId);
    };
    const stopped = (async () => {
      await until(() => acknowledged.size >= 20, { what: 'the run under way' });
      await b.close();
      running = running.filter((r) => r !== b);
    })();
    // Four submitters, one request each in flight, while B stops.
    await Promise.all(
      [0, 1, 2, 3].map(async (lane) => {
        for (let i = lane; i < 200; i += 4) await submit(i);
      }),
    );
    await stopped;
    assert.equal(acknowledged.size, 200);
    assert.equal(new Set(acknowledged.values()).size, 200, 'one job per key');
    for (const id of acknowledged.values()) assert.equal((await client.status(id)).state, 'QUEUED');
    // The shards B led are A's now, and the client reaches them directly again.
    await sharedOut([a], SHARDS);
    await until(
      async () => {
        const before = routedBy(a);
        for (const id of [...acknowledged.values()].slice(0, SHARDS)) await client.status(id);
        return routedBy(a) === before;
      },
      { what: 'the moved shards reached directly', timeoutMs: 15_000 },
    );
  });
});
