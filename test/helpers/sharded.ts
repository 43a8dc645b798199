/**
 * Sharded coordinators in-process for tests: their options on a database
 * (fast timings, a 1 s lease renewed every 100 ms), waiting until the shards
 * are shared out, and a queue name in each shard.
 */
import { after, afterEach } from 'node:test';
import { createTestDatabase, dropTestDatabase } from './postgres.js';
import {
  DEFAULT_COORDINATOR_OPTIONS,
  type CoordinatorOptions,
} from '../../src/coordinator/options.js';
import { DtpClient } from '../../src/client/client.js';
import { ShardedCoordinator } from '../../src/server/sharding/sharded-coordinator.js';
import { shardOfQueue } from '../../src/protocol/shards.js';
import { FAST_TIMINGS, testLogger } from './test-coordinator.js';
import { until } from './until.js';

export function shardedOptions(url: string): CoordinatorOptions {
  return {
    ...DEFAULT_COORDINATOR_OPTIONS,
    ...FAST_TIMINGS,
    workerPort: 0,
    clientPort: 0,
    bindHost: '127.0.0.1',
    databasePath: url,
    leaseTtlMs: 1_000,
    leaseRenewIntervalMs: 100,
    logger: testLogger('sharded'),
  };
}

/** Every one of `shards` led, each coordinator leading floor or ceil of its share. */
export async function sharedOut(cs: ShardedCoordinator[], shards: number): Promise<void> {
  await until(
    () => {
      const counts = cs.map((c) => c.ledShards().length);
      const low = Math.floor(shards / cs.length);
      return (
        counts.reduce((x, y) => x + y, 0) === shards &&
        counts.every((n) => n === low || n === low + 1)
      );
    },
    { what: 'the shards shared out', timeoutMs: 10_000, intervalMs: 20 },
  );
}

/** A queue name in each shard, by shard (`q<i>`, the first that hashes there). */
export function queuesByShard(shards: number): string[] {
  const out = new Array<string | undefined>(shards).fill(undefined);
  for (let i = 0; out.includes(undefined); i++) out[shardOfQueue(`q${i}`, shards)] ??= `q${i}`;
  return out as string[];
}

/**
 * What a test file of sharded coordinators keeps between its tests: the
 * databases it made (dropped after the file), what is running (closed after
 * each test) and other clean-ups. The hooks are registered when it is made.
 */
export function shardedScope(): {
  database: () => Promise<string>;
  running: { close(): Promise<void> }[];
  cleanups: (() => void)[];
  /** Stops closing `closed` after the test (the test closed it itself). */
  forget: (closed: { close(): Promise<void> }) => void;
  /** Two coordinators of `shards` shards on a fresh database, the shards shared out. */
  pair: (shards: number) => Promise<[ShardedCoordinator, ShardedCoordinator]>;
  /** A client of `c`'s public client port, closed after the test. */
  clientOf: (c: ShardedCoordinator) => Promise<DtpClient>;
} {
  const databases: string[] = [];
  const running: { close(): Promise<void> }[] = [];
  const cleanups: (() => void)[] = [];
  after(async () => {
    for (const url of databases) await dropTestDatabase(url);
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((c) => c.close()));
    for (const cleanup of cleanups.splice(0)) cleanup();
  });
  const database = async (): Promise<string> => {
    const url = await createTestDatabase();
    databases.push(url);
    return url;
  };
  const start = async (url: string, shards: number): Promise<ShardedCoordinator> => {
    const c = await ShardedCoordinator.start(shardedOptions(url), shards);
    running.push(c);
    return c;
  };
  return {
    database,
    running,
    cleanups,
    forget: (closed) => {
      const at = running.indexOf(closed);
      if (at >= 0) running.splice(at, 1);
    },
    pair: async (shards) => {
      const url = await database();
      const pair: [ShardedCoordinator, ShardedCoordinator] = [
        await start(url, shards),
        await start(url, shards),
      ];
      await sharedOut(pair, shards);
      return pair;
    },
    clientOf: async (c) => {
      const client = await DtpClient.connect({ host: '127.0.0.1', port: c.clientPort });
      running.push(client);
      return client;
    },
  };
}
