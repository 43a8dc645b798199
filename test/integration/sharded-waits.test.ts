/**
 * `ctx.waitFor` on a job of another shard, on PostgreSQL: two sharded
 * coordinators share four shards; a durable handler (the steps fixture's
 * `steps.waiter`) in a shard one coordinator leads waits for a job of a
 * shard the other leads and goes on with its result; and it still does
 * when the coordinator leading the waiter's shard stops while it waits (the
 * shard moves, its new leader recovers the wait and hears the job's end
 * through the outbox).
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import type { DtpClient, JobHandle } from '../../src/client/index.js';
import type { JobSnapshot } from '../../src/protocol/messages.js';
import type { ShardedCoordinator } from '../../src/server/sharding/sharded-coordinator.js';
import type { Worker } from '../../src/worker/worker.js';
import { postgresSkip } from '../helpers/postgres.js';
import { queuesByShard, sharedOut, shardedScope } from '../helpers/sharded.js';
import { startTaskWorker, tempDir } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const skip = postgresSkip();
const SHARDS = 4;
const QUEUES = queuesByShard(SHARDS);
const STEP_TASKS = fileURLToPath(new URL('../fixtures/step-tasks.js', import.meta.url));
const scope = shardedScope();
const { cleanups, pair, clientOf } = scope;

/** A worker of the steps fixture, given the worker port of `c` (it works on every shard). */
function stepWorker(c: ShardedCoordinator, workerId: string, queues?: string[]): Promise<Worker> {
  return startTaskWorker(c.workerPort, workerId, {
    capacity: 4,
    tasks: [STEP_TASKS],
    ...(queues !== undefined && { queues }),
  });
}

function queueOf(shard: number): string {
  return QUEUES[shard] as string;
}

function scratch(): string {
  const made = tempDir('dtp-sharded-waits-');
  cleanups.push(made.remove);
  return made.dir;
}

/** A SLEEP of `durationMillis` in `targetShard`, and a `steps.waiter` in `waiterShard` that waits for it. */
async function targetAndWaiter(
  client: DtpClient,
  durationMillis: number,
  targetShard: number,
  waiterShard: number,
): Promise<{ target: JobHandle; waiter: JobHandle }> {
  const target = await client.submit('SLEEP', { durationMillis }, { queue: queueOf(targetShard) });
  const waiter = await client.submit(
    'steps.waiter',
    { dir: scratch(), jobId: target.jobId },
    { queue: queueOf(waiterShard) },
  );
  return { target, waiter };
}

/** What the waiter's handler saw of the job it waited for, from its result. */
function outcomeOf(waiter: JobSnapshot): unknown {
  assert.equal(waiter.state, 'COMPLETED', `waiter ${waiter.jobId}: ${waiter.error ?? ''}`);
  return (JSON.parse(waiter.result ?? 'null') as { outcome: unknown }).outcome;
}

/** The outcome a handler gets of a job that completed. */
function completed(target: JobSnapshot): unknown {
  assert.equal(target.state, 'COMPLETED', `target ${target.jobId}: ${target.error ?? ''}`);
  return {
    jobId: target.jobId,
    state: 'COMPLETED',
    result: target.resultFormat === 'json' ? JSON.parse(target.result ?? 'null') : target.result,
    error: null,
    omitted: false,
  };
}

describe('ctx.waitFor on a job of another shard', { skip }, () => {
  it('waits for a job that another coordinator’s shard runs, and gets its result', async () => {
    const [a, b] = await pair(SHARDS);
    const [waiterShard] = a.ledShards() as [number];
    const [targetShard] = b.ledShards() as [number];
    const client = await clientOf(a);
    const worker = await stepWorker(a, 'w-waits');
    try {
      const { target, waiter } = await targetAndWaiter(client, 1_500, targetShard, waiterShard);
      await until(async () => (await client.status(waiter.jobId)).state === 'WAITING', {
        what: 'the waiter waiting',
        timeoutMs: 10_000,
      });
      const done = await client.wait(waiter.jobId, 20_000);
      const ended = await client.status(target.jobId);
      assert.deepEqual(outcomeOf(done), completed(ended));
      assert.deepEqual(
        done.steps?.map((s) => s.name),
        ['before', 'dtp.waitFor'],
      );
    } finally {
      await worker.close();
    }
  });

  it('goes on waiting when the coordinator leading the waiter’s shard stops', async () => {
    const [a, b] = await pair(SHARDS);
    const [waiterShard] = a.ledShards() as [number];
    const [targetShard] = b.ledShards() as [number];
    const client = await clientOf(b);
    // Nobody takes the target's queue yet: the waiter waits for a job that has not run.
    const { target, waiter } = await targetAndWaiter(client, 50, targetShard, waiterShard);
    const first = await stepWorker(a, 'w-first', [queueOf(waiterShard)]);
    try {
      await until(async () => (await client.status(waiter.jobId)).state === 'WAITING', {
        what: 'the waiter waiting',
        timeoutMs: 10_000,
      });
    } finally {
      await first.close();
    }
    await a.close();
    scope.forget(a);
    await sharedOut([b], SHARDS);
    assert.equal((await client.status(waiter.jobId)).state, 'WAITING', 'recovered waiting');
    const second = await stepWorker(b, 'w-second');
    try {
      const done = await client.wait(waiter.jobId, 20_000);
      const ended = await client.status(target.jobId);
      assert.deepEqual(outcomeOf(done), completed(ended));
    } finally {
      await second.close();
    }
  });
});
