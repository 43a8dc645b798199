/**
 * The client's shard table (src/client/shard-table.ts): which requests go
 * straight to a shard and which through the coordinator's own port, and the
 * memories of addresses that could not be reached and of shards that
 * answered NOT_LEADER.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  PUBLIC,
  RefusedShards,
  SHARD_MAP_REFRESH_MS,
  UNREACHABLE_PAUSE_MS,
  UnreachableAddresses,
  isStale,
  routeOf,
  shardTableOf,
  type ShardTable,
} from '../../src/client/shard-table.js';
import type { ClientRequest, ShardInfo } from '../../src/protocol/messages.js';
import { shardOfQueue, stampShard } from '../../src/protocol/shards.js';
import { queuesByShard } from '../helpers/sharded.js';

const SHARDS = 4;
const QUEUES = queuesByShard(SHARDS);

function info(shard: number, clientAddress: string | null, epoch = 1): ShardInfo {
  return { shard, leader: 'h:7071', epoch, clientAddress, workerAddress: null };
}

function table(addresses: (string | null)[] = ['s0:1', 's1:1', 's2:1', 's3:1']): ShardTable {
  const made = shardTableOf(
    addresses.map((a, shard) => info(shard, a)),
    1_000,
  );
  assert.ok(made !== null);
  return made;
}

/** Where `msg` goes with `t` just after it was read. */
function route(msg: ClientRequest, t: ShardTable | null): ReturnType<typeof routeOf> {
  return routeOf(msg, t, t?.readAtMs ?? 0);
}

function jobIn(shard: number): string {
  return stampShard('018f0000-0000-7000-8000-000000000fff', shard, SHARDS);
}

function submit(queue?: string): ClientRequest {
  return {
    type: 'SUBMIT_JOB',
    taskType: 'ECHO',
    payload: {},
    maxAttempts: null,
    idempotencyKey: null,
    priority: null,
    ...(queue !== undefined && { queue }),
  };
}

describe('shardTableOf', () => {
  it('reads each shard address and epoch of a whole map, and how long each lease lasts', () => {
    const made = shardTableOf(
      [{ ...info(0, 'a:1', 3), leaseLeftMillis: 4_000 }, info(1, null, 0), info(2, 'c:1', 5)],
      42,
    );
    assert.deepEqual(made, {
      shards: 3,
      addresses: ['a:1', null, 'c:1'],
      epochs: [3, 0, 5],
      // Shard 2's lease was not said: its address lasts until the next read is due.
      usableUntilMs: [4_042, 42, 42 + SHARD_MAP_REFRESH_MS],
      readAtMs: 42,
      // At half the shortest lease.
      refreshAtMs: 2_042,
    });
  });

  it('has nothing to route for one shard or a map with shards missing', () => {
    assert.equal(shardTableOf([info(0, 'a:1')], 0), null);
    assert.equal(shardTableOf([], 0), null);
    assert.equal(shardTableOf([info(0, 'a:1'), info(2, 'b:1')], 0), null);
  });

  it('is read again at half the shortest lease, and at least every refresh interval', () => {
    // Leases not said last until the next read: that is due half way.
    const t = table();
    assert.equal(isStale(t, t.readAtMs + SHARD_MAP_REFRESH_MS / 2 - 1), false);
    assert.equal(isStale(t, t.readAtMs + SHARD_MAP_REFRESH_MS / 2), true);
    const long = shardTableOf(
      [0, 1].map((shard) => ({ ...info(shard, `s${shard}:1`), leaseLeftMillis: 60_000 })),
      0,
    );
    assert.equal(long?.refreshAtMs, SHARD_MAP_REFRESH_MS);
  });
});

describe('routeOf', () => {
  it('sends a request about one queue or job to its shard', () => {
    const t = table();
    for (const [shard, queue] of QUEUES.entries()) {
      assert.deepEqual(route(submit(queue), t), {
        via: 'shard',
        shard,
        address: `s${shard}:1`,
        epoch: 1,
      });
      const jobId = jobIn(shard);
      for (const msg of [
        { type: 'GET_JOB_STATUS', jobId },
        { type: 'CANCEL_JOB', jobId },
        { type: 'WAIT_JOB', jobId, timeoutMillis: 10 },
        { type: 'LIST_JOBS', limit: 10, state: null, cursor: null, queue },
        { type: 'SET_QUEUE', name: queue, paused: true },
      ] as ClientRequest[]) {
        assert.deepEqual(route(msg, t), {
          via: 'shard',
          shard,
          address: `s${shard}:1`,
          epoch: 1,
        });
      }
    }
    const home = shardOfQueue(null, SHARDS);
    assert.deepEqual(route(submit(), t), {
      via: 'shard',
      shard: home,
      address: `s${home}:1`,
      epoch: 1,
    });
  });

  it('sends a batch to its shard only when all its jobs are there', () => {
    const t = table();
    const job = (queue: string): Record<string, unknown> => ({
      taskType: 'ECHO',
      payload: {},
      queue,
    });
    const one = { type: 'SUBMIT_JOBS', jobs: [job(QUEUES[2]!), job(QUEUES[2]!)] } as ClientRequest;
    assert.equal(route(one, t).via, 'shard');
    const two = { type: 'SUBMIT_JOBS', jobs: [job(QUEUES[1]!), job(QUEUES[2]!)] } as ClientRequest;
    assert.equal(route(two, t), PUBLIC);
  });

  it('leaves lists of every queue, flows, subscriptions and unknown ids to the public port', () => {
    const t = table();
    for (const msg of [
      { type: 'LIST_JOBS', limit: null, state: null, cursor: null },
      { type: 'LIST_QUEUES' },
      { type: 'LIST_WORKERS' },
      { type: 'LIST_SHARDS' },
      { type: 'PUBLISH_EVENT', name: 'e', payload: null },
      {
        type: 'SUBMIT_FLOW',
        jobs: [{ ref: 'a', taskType: 'ECHO', payload: {}, queue: QUEUES[0] }],
      },
      { type: 'SUBSCRIBE_JOBS', filter: { jobId: jobIn(1), taskType: null, queue: null } },
      { type: 'GET_JOB_STATUS', jobId: 'not-an-id-of-ours' },
      { type: 'GET_JOB_STATUS', jobId: jobIn(9) },
    ] as ClientRequest[]) {
      assert.equal(route(msg, t), PUBLIC, msg.type);
    }
  });

  it('uses the public port for a shard whose lease may have ended since the map was read', () => {
    const t = shardTableOf(
      [0, 1, 2, 3].map((shard) => ({ ...info(shard, `s${shard}:1`), leaseLeftMillis: 1_000 })),
      500,
    );
    assert.ok(t !== null);
    const msg = submit(QUEUES[3]);
    assert.equal(routeOf(msg, t, 1_499).via, 'shard');
    assert.equal(routeOf(msg, t, 1_500), PUBLIC);
    const led = shardTableOf(
      [0, 1, 2, 3].map((shard) => ({ ...info(shard, `s${shard}:1`), leaseLeftMillis: 0 })),
      0,
    );
    assert.equal(routeOf(msg, led, 0), PUBLIC);
  });

  it('uses the public port without a table, or for a shard whose address is unknown', () => {
    assert.equal(route(submit(QUEUES[0]), null), PUBLIC);
    const t = table(['s0:1', null, 's2:1', 's3:1']);
    assert.equal(route(submit(QUEUES[1]), t), PUBLIC);
    assert.equal(route(submit(QUEUES[0]), t).via, 'shard');
  });
});

describe('UnreachableAddresses', () => {
  it('blocks an address for the pause, then lets it be tried again', () => {
    const unreachable = new UnreachableAddresses();
    assert.equal(unreachable.blocked('a:1', 0), false);
    unreachable.mark('a:1', 100);
    assert.equal(unreachable.blocked('a:1', 100 + UNREACHABLE_PAUSE_MS - 1), true);
    assert.equal(unreachable.blocked('b:1', 200), false);
    assert.equal(unreachable.blocked('a:1', 100 + UNREACHABLE_PAUSE_MS), false);
  });
});

describe('RefusedShards', () => {
  it('keeps a shard off its port while the map names what refused', () => {
    const refused = new RefusedShards();
    const before = table();
    assert.equal(refused.blocked(1, before), false);
    refused.refused(1, 's1:1', 1);
    assert.equal(refused.blocked(1, before), true);
    assert.equal(refused.blocked(2, before), false);
    // A map read before the move names the same address and epoch.
    assert.equal(refused.blocked(1, table()), true);
  });

  it('forgets the refusal once the map names another address or epoch', () => {
    const refused = new RefusedShards();
    refused.refused(1, 's1:1', 1);
    assert.equal(refused.blocked(1, table(['s0:1', 'moved:1', 's2:1', 's3:1'])), false);
    assert.equal(refused.blocked(1, table()), false, 'forgotten for good');
    refused.refused(1, 's1:1', 1);
    const nextEpoch = shardTableOf(
      [info(0, 's0:1'), info(1, 's1:1', 2), info(2, 's2:1'), info(3, 's3:1')],
      0,
    );
    assert.ok(nextEpoch !== null);
    assert.equal(refused.blocked(1, nextEpoch), false);
  });
});
