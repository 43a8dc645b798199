/**
 * Two shards' cores for the core tests of work across shards: each a
 * CoreHarness of one shard of a two-shard database, with its own store,
 * wired through the one outbox they share (MemoryOutbox, as the shards of a
 * PostgreSQL database share `dtp.shard_outbox`). Messages are delivered by
 * hand, as a shard's term does on each poll.
 */
import assert from 'node:assert/strict';
import type { JobSnapshot } from '../../src/protocol/messages.js';
import { shardOfJobId, shardOfQueue } from '../../src/protocol/shards.js';
import { MemoryOutbox, MemoryStore } from '../../src/store/memory-store.js';
import { CoreHarness } from './core-harness.js';

export const SHARDS = 2;

/** A queue name in each shard. */
export const QUEUE = ((): [string, string] => {
  const out: (string | undefined)[] = [undefined, undefined];
  for (let i = 0; out.includes(undefined); i++) out[shardOfQueue(`q${i}`, SHARDS)] ??= `q${i}`;
  return out as [string, string];
})();

export interface Cluster {
  outbox: MemoryOutbox;
  /** The core of shard 0 and of shard 1. */
  a: CoreHarness;
  b: CoreHarness;
}

export function cluster(): Cluster {
  const outbox = new MemoryOutbox();
  const shardCore = (shard: number): CoreHarness =>
    new CoreHarness({
      config: { shard: { shard, shards: SHARDS } },
      store: new MemoryStore({ outbox }),
    });
  return { outbox, a: shardCore(0), b: shardCore(1) };
}

/** Delivers messages, shard after shard, until the outbox is empty; returns how many rounds. */
export function pump(c: Cluster): number {
  let rounds = 0;
  while (c.outbox.all().length > 0) {
    assert.ok(rounds < 20, `the outbox does not drain: ${JSON.stringify(c.outbox.all())}`);
    c.a.deliverOutbox();
    c.b.deliverOutbox();
    rounds++;
  }
  return rounds;
}

/** The job's snapshot from its own shard's core. */
export function statusIn(c: Cluster, jobId: string): JobSnapshot {
  return (shardOfJobId(jobId, SHARDS) === 0 ? c.a : c.b).status(jobId);
}

/** The kinds of the messages in the outbox now, with their target shards. */
export function outboxKinds(c: Cluster): [number, string][] {
  return c.outbox.all().map((m) => [m.targetShard, m.body.type]);
}
