/**
 * Flows and dependencies across shards on PostgreSQL: two sharded
 * coordinators share four shards; a flow whose jobs are in every shard,
 * submitted to any coordinator, runs in dependency order through the
 * cluster's outbox; it still does when the coordinator leading the parent's
 * shard stops between the parent's end and its children's start (its shards
 * move, and the messages not yet applied are read by their new leader); and
 * a plain submission may name a parent of another shard.
 *
 * Workers register with each shard's leader directly (its `workerAddress`
 * in the shard map), one per address.
 */
import assert from 'node:assert/strict';
import { after, afterEach, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/client.js';
import { ShardedCoordinator } from '../../src/server/sharding/sharded-coordinator.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { RemoteError } from '../../src/client/errors.js';
import type { JobSnapshot } from '../../src/protocol/messages.js';
import { shardOfJobId } from '../../src/protocol/shards.js';
import { Worker } from '../../src/worker/worker.js';
import { createTestDatabase, dropTestDatabase, postgresSkip } from '../helpers/postgres.js';
import { testLogger } from '../helpers/test-coordinator.js';
import { queuesByShard, sharedOut, shardedOptions } from '../helpers/sharded.js';
import { until } from '../helpers/until.js';

const skip = postgresSkip();
const SHARDS = 4;
const databases: string[] = [];
let running: { close(): Promise<void> }[] = [];

after(async () => {
  for (const url of databases) await dropTestDatabase(url);
});
afterEach(async () => {
  // Workers first: they would otherwise chase the coordinators' ports.
  const workers = running.filter((r) => r instanceof Worker);
  await Promise.all(workers.map((w) => w.close()));
  await Promise.all(running.filter((r) => !(r instanceof Worker)).map((c) => c.close()));
  running = [];
});

async function start(url: string): Promise<ShardedCoordinator> {
  const c = await ShardedCoordinator.start(shardedOptions(url), SHARDS);
  running.push(c);
  return c;
}

/** Two coordinators on a fresh database, each leading two shards. */
async function pair(): Promise<[ShardedCoordinator, ShardedCoordinator]> {
  const url = await createTestDatabase();
  databases.push(url);
  const a = await start(url);
  const b = await start(url);
  await sharedOut([a, b], SHARDS);
  return [a, b];
}

async function clientOf(c: ShardedCoordinator): Promise<DtpClient> {
  const client = await DtpClient.connect({ host: '127.0.0.1', port: c.clientPort });
  running.push(client);
  return client;
}

/** A queue name in each shard. */
const QUEUES = queuesByShard(SHARDS);

function queueOf(shard: number): string {
  return QUEUES[shard] as string;
}

/**
 * One worker at each shard leader's worker address the shard map names now
 * (those of `shards` only, when given), taking `queues` only when given.
 */
async function workersAt(
  client: DtpClient,
  options: { shards?: number[]; queues?: string[] } = {},
): Promise<void> {
  await until(async () => (await client.shards()).shards.every((s) => s.workerAddress !== null), {
    what: 'every shard led',
    timeoutMs: 10_000,
  });
  const map = await client.shards();
  const addresses = new Set(
    map.shards
      .filter((s) => options.shards === undefined || options.shards.includes(s.shard))
      .map((s) => s.workerAddress as string),
  );
  for (const address of addresses) {
    const worker = Worker.start({
      coordinatorHost: address,
      coordinatorPort: 1,
      workerId: `w-${address}-${running.length}`,
      capacity: 4,
      heartbeatIntervalMs: 50,
      reconnectDelayMs: 50,
      logger: testLogger('worker'),
      ...(options.queues !== undefined && { queues: options.queues }),
    });
    running.push(worker);
  }
}

/**
 * The job's end. A job another shard made for a flow exists in its shard
 * once that shard applied the flow's message (a poll later): until then its
 * id is unknown there, and the wait is asked again.
 */
async function ended(client: DtpClient, jobId: string, timeoutMs = 20_000): Promise<JobSnapshot> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await client.wait(jobId, Math.max(1, deadline - Date.now()));
    } catch (err) {
      const unknown = err instanceof RemoteError && err.code === ErrorCode.UnknownJob;
      if (!unknown || Date.now() >= deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

/** Each job started after every parent of it had finished. */
function assertOrder(jobs: ReadonlyMap<string, JobSnapshot>): void {
  for (const job of jobs.values()) {
    assert.equal(job.state, 'COMPLETED', `${job.jobId}: ${job.error ?? ''}`);
    for (const parentId of job.dependsOn ?? []) {
      const parent = jobs.get(parentId);
      assert.ok(parent !== undefined, `parent ${parentId} of ${job.jobId}`);
      assert.ok(
        (job.startedAtMillis ?? 0) >= (parent.finishedAtMillis ?? Infinity),
        `${job.jobId} started before its parent ${parentId} finished`,
      );
    }
  }
}

const sleep = (ref: string, shard: number, dependsOn?: string[]) => ({
  ref,
  taskType: 'SLEEP' as const,
  payload: { durationMillis: 20 },
  queue: queueOf(shard),
  ...(dependsOn !== undefined && { dependsOn }),
});

describe('flows and dependencies across shards', { skip }, () => {
  it('runs a flow whose jobs are in every shard in dependency order', async () => {
    const [a, b] = await pair();
    const viaB = await clientOf(b);
    await workersAt(viaB);
    // A chain through the four shards, a fan-out from the first and a fan-in to the last.
    const flow = await viaB.submitFlow({
      jobs: [
        sleep('s0', 0),
        sleep('s1', 1, ['s0']),
        sleep('s2', 2, ['s1']),
        sleep('s3', 3, ['s2']),
        sleep('f1', 1, ['s0']),
        sleep('f2', 2, ['s0']),
        sleep('f3', 3, ['s0']),
        sleep('end', 0, ['s3', 'f1', 'f2', 'f3']),
      ],
    });
    for (const [ref, id] of Object.entries(flow.jobs)) {
      const shard = Number(/\d/.exec(ref === 'end' ? '0' : ref)?.[0]);
      assert.equal(shardOfJobId(id, SHARDS), shard, `${ref} is in its queue's shard`);
    }
    const viaA = await clientOf(a);
    const jobs = new Map<string, JobSnapshot>();
    for (const id of Object.values(flow.jobs)) jobs.set(id, await ended(viaA, id));
    assertOrder(jobs);
  });

  it("keeps going when the coordinator leading the parent's shard stops between the parent's end and its children's start", async () => {
    const [a, b] = await pair();
    const [parentShard, otherOfA] = a.ledShards() as [number, number];
    const [ofB] = b.ledShards() as [number];
    const viaB = await clientOf(b);
    const flow = await viaB.submitFlow({
      jobs: [
        sleep('parent', parentShard),
        sleep('near', otherOfA, ['parent']),
        sleep('far', ofB, ['parent']),
        sleep('last', parentShard, ['near', 'far']),
      ],
    });
    const id = (ref: string): string => flow.jobs[ref] as string;
    // Only the parent can run: nobody takes the other queues yet.
    await workersAt(viaB, { shards: [parentShard], queues: [queueOf(parentShard)] });
    const parent = await ended(viaB, id('parent'));
    assert.equal(parent.state, 'COMPLETED');
    // Its end is committed, with the messages to its children's shards; the
    // coordinator leading it (and one of them) stops before they run.
    await Promise.all(running.filter((r) => r instanceof Worker).map((w) => w.close()));
    running = running.filter((r) => !(r instanceof Worker) && r !== a);
    await a.close();
    await sharedOut([b], SHARDS);
    await workersAt(viaB);
    const jobs = new Map<string, JobSnapshot>([[parent.jobId, parent]]);
    for (const ref of ['near', 'far', 'last']) jobs.set(id(ref), await ended(viaB, id(ref)));
    assertOrder(jobs);
  });

  it('takes a plain submission whose parent is in another shard', async () => {
    const [a, b] = await pair();
    const viaA = await clientOf(a);
    const parent = await viaA.submit('SLEEP', { durationMillis: 50 }, { queue: queueOf(0) });
    const child = await viaA.submit(
      'SLEEP',
      { durationMillis: 1 },
      { queue: queueOf(1), dependsOn: [parent.jobId] },
    );
    const waiting = await viaA.status(child.jobId);
    assert.equal(waiting.state, 'WAITING');
    assert.deepEqual(waiting.dependsOn, [parent.jobId]);
    // A parent no shard has (its id names shard 2): the child is cancelled.
    const ghost = `${parent.jobId.slice(0, -3)}002`;
    const orphan = await viaA.submit(
      'SLEEP',
      { durationMillis: 1 },
      { queue: queueOf(3), dependsOn: [ghost] },
    );
    const viaB = await clientOf(b);
    await workersAt(viaB);
    const jobs = new Map<string, JobSnapshot>();
    for (const job of [parent, child]) jobs.set(job.jobId, await ended(viaB, job.jobId));
    assertOrder(jobs);
    const cancelled = await ended(viaB, orphan.jobId);
    assert.equal(cancelled.state, 'CANCELLED');
    assert.match(cancelled.error ?? '', /unknown/);
  });
});
