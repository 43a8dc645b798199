/**
 * What a worker makes of a sharded coordinator's map (src/worker/shard-map.ts):
 * the shards it serves, one route per worker address, and the split of its
 * capacity and prefetch over those routes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ShardInfo } from '../../src/protocol/messages.js';
import { shardOfQueue } from '../../src/protocol/shards.js';
import { planShards, shareOut, splitShare } from '../../src/worker/shard-map.js';

function shard(n: number, workerAddress: string | null): ShardInfo {
  return { shard: n, leader: null, epoch: 1, clientAddress: null, workerAddress };
}

const sum = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0);

describe('splitShare', () => {
  it('splits in proportion to the weights, adding up to the total', () => {
    assert.deepEqual(splitShare(12, [1, 1, 1], 1), [4, 4, 4]);
    assert.deepEqual(splitShare(12, [2, 1, 1], 1), [6, 3, 3]);
    assert.deepEqual(splitShare(10, [1, 1, 1], 1), [4, 3, 3]); // largest remainders, earlier first
    assert.deepEqual(splitShare(7, [3, 1], 1), [5, 2]); // 5.25 and 1.75: the larger remainder wins
  });

  it('gives each at least the floor, taken from the largest share', () => {
    assert.deepEqual(splitShare(4, [10, 1, 1], 1), [2, 1, 1]);
    assert.deepEqual(splitShare(3, [1, 1, 1], 1), [1, 1, 1]);
  });

  it('lets the shares add up to more than the total when there are more of them', () => {
    const shares = splitShare(2, [1, 1, 1, 1, 1], 1);
    assert.deepEqual(shares, [1, 1, 1, 1, 1]);
    assert.deepEqual(splitShare(1, [3, 1], 1), [1, 1]);
  });

  it('may give nothing where the floor is 0', () => {
    assert.deepEqual(splitShare(2, [1, 1, 1], 0), [1, 1, 0]);
    assert.deepEqual(splitShare(0, [1, 2], 0), [0, 0]);
    assert.deepEqual(splitShare(5, [], 1), []);
  });

  it('always adds up to the total when the total covers the floors', () => {
    for (let total = 1; total <= 40; total++) {
      for (const weights of [[1], [1, 2], [5, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1], [3, 9, 2]]) {
        const shares = splitShare(total, weights, 1);
        const what = `${total} over ${weights.join(',')}: ${shares.join(',')}`;
        if (total >= weights.length) assert.equal(sum(shares), total, what);
        else assert.equal(sum(shares), weights.length);
        assert.ok(
          shares.every((s) => s >= 1),
          what,
        );
      }
    }
  });
});

describe('shareOut', () => {
  it('splits capacity (at least 1) and prefetch (within 4 x its capacity share) by shards led', () => {
    const routes = [{ shards: [0, 2] }, { shards: [1] }];
    assert.deepEqual(shareOut(3, 12, routes), [
      { capacity: 2, prefetch: 8 },
      { capacity: 1, prefetch: 4 },
    ]);
    assert.deepEqual(shareOut(1, 4, routes), [
      { capacity: 1, prefetch: 3 },
      { capacity: 1, prefetch: 1 },
    ]);
    // A prefetch share is never more than its capacity share may ask for.
    assert.deepEqual(shareOut(4, 16, [{ shards: [0, 1, 2, 3, 4, 5, 6] }, { shards: [7] }]), [
      { capacity: 3, prefetch: 12 },
      { capacity: 1, prefetch: 2 },
    ]);
    assert.deepEqual(shareOut(4, 0, [{ shards: [0] }]), [{ capacity: 4, prefetch: 0 }]);
  });
});

describe('planShards', () => {
  it('serves every shard, one route per worker address in order of first shard', () => {
    const plan = planShards(
      [shard(0, 'a:7100'), shard(1, 'b:7100'), shard(2, 'a:7100'), shard(3, null)],
      null,
      7070,
    );
    assert.ok(plan !== null);
    assert.equal(plan.count, 4);
    assert.deepEqual(plan.served, [0, 1, 2, 3]);
    assert.deepEqual(
      plan.routes.map((r) => [r.address, r.shards]),
      [
        ['a:7100', [0, 2]],
        ['b:7100', [1]],
      ],
    );
    assert.deepEqual(plan.unled, [3]);
  });

  it('serves only the shards of its queues', () => {
    const queues = ['emails', 'images'];
    const mine = [...new Set(queues.map((q) => shardOfQueue(q, 8)))].sort((a, b) => a - b);
    const infos = Array.from({ length: 8 }, (_, n) => shard(n, `h${n}:1000`));
    const plan = planShards(infos, queues, 7070);
    assert.ok(plan !== null);
    assert.deepEqual(plan.served, mine);
    assert.deepEqual(
      plan.routes.map((r) => r.address),
      mine.map((n) => `h${n}:1000`),
    );
  });

  it('normalises addresses, takes a bare host with the default port, and skips bad ones', () => {
    const plan = planShards(
      [shard(0, ' a:7100'), shard(1, 'a'), shard(2, 'a:99999'), shard(3, '')],
      null,
      7070,
    );
    assert.ok(plan !== null);
    assert.deepEqual(
      plan.routes.map((r) => [r.address, r.shards]),
      [
        ['a:7100', [0]],
        ['a:7070', [1]],
      ],
    );
    assert.deepEqual(plan.unled, [2, 3]);
  });

  it('counts shards by the highest number listed, and refuses a map with none', () => {
    const plan = planShards([shard(2, 'a:1'), shard(0, 'a:1')], null, 7070);
    assert.equal(plan?.count, 3);
    assert.deepEqual(plan?.unled, [1]);
    assert.equal(planShards([], null, 7070), null);
    assert.equal(planShards([shard(-1, 'a:1')], null, 7070), null);
  });
});
