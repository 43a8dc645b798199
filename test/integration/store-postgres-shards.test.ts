/**
 * PostgreSQL with shards: each shard's tables in a schema of their own,
 * fenced by that schema's lease only; the cluster's tables in schema `dtp`
 * (the shard count, the coordinators alive); every shard's lease at once.
 * The store contract in a shard's schema runs in store-postgres.test.ts.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { LeaseLostError } from '../../src/store/lease.js';
import type { OutboxMessage } from '../../src/store/store.js';
import type { Member } from '../../src/store/membership.js';
import {
  claimShardCount,
  ensureShardSchemas,
  readShardLeases,
} from '../../src/store/postgres/cluster.js';
import { PostgresMembership } from '../../src/store/postgres/membership.js';
import { PostgresLease } from '../../src/store/postgres/postgres-lease.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { OutboxListener } from '../../src/store/postgres/outbox-listener.js';
import { ShardWriter } from '../../src/store/postgres/shard-writer.js';
import { silentLogger } from '../helpers/logger.js';
import {
  SCHEMA_VERSION,
  checkedSchema,
  inSchema,
  migrate,
} from '../../src/store/postgres/schema.js';
import { jobRecord } from '../helpers/job-record.js';
import {
  createTestDatabase,
  dropTestDatabase,
  postgresSkip,
  queryDatabase,
} from '../helpers/postgres.js';
import { batchOf } from '../helpers/store-contract.js';
import { OLD_JOB } from '../helpers/upgrade.js';
import { until } from '../helpers/until.js';

const skip = postgresSkip();
const databases: string[] = [];
const closers: { close(): Promise<void> }[] = [];

const holder = (nodeId: string) => ({
  nodeId,
  workerAddress: `${nodeId}:7070`,
  clientAddress: `${nodeId}:7071`,
});
const member = (nodeId: string): Member => ({
  nodeId,
  clientAddress: `${nodeId}:7071`,
  workerAddress: `${nodeId}:7070`,
});

async function newDatabase(): Promise<string> {
  const url = await createTestDatabase();
  databases.push(url);
  return url;
}

function leaseOn(url: string, schema: string): PostgresLease {
  const lease = new PostgresLease({ url, operationTimeoutMs: 5_000, schema });
  closers.push(lease);
  return lease;
}

/** The lease of `schema` taken by `nodeId`; returns its epoch. */
async function lead(url: string, schema: string, nodeId = 'n1'): Promise<number> {
  const got = await leaseOn(url, schema).tryAcquire(holder(nodeId), 60_000);
  assert.ok(got.acquired);
  return got.epoch;
}

async function openStore(
  url: string,
  schema: string,
  epoch: number,
  shardWriter?: ShardWriter,
): Promise<PostgresStore> {
  const store = await PostgresStore.open({
    url,
    epoch,
    schema,
    ...(shardWriter !== undefined && { shardWriter }),
  });
  closers.push(store);
  return store;
}

function membershipOn(url: string): PostgresMembership {
  const membership = new PostgresMembership({ url, operationTimeoutMs: 5_000 });
  closers.push(membership);
  return membership;
}

async function jobIn(store: PostgresStore, jobId: string): Promise<string | null> {
  const read = await store.read({ op: 'job', jobId, withAttempts: false });
  assert.equal(read.op, 'job');
  return read.op === 'job' ? (read.job?.jobId ?? null) : null;
}

after(async () => {
  await Promise.all(closers.map((closer) => closer.close()));
  for (const url of databases) await dropTestDatabase(url);
});

describe('shard schema names', () => {
  it('rewrites every dtp. of a statement for a shard schema, and leaves dtp alone', () => {
    const sql = 'SELECT dtp.commit_batch($1) FROM dtp.jobs j WHERE j.x = 1';
    assert.equal(
      inSchema(sql, 'dtp_s12'),
      'SELECT dtp_s12.commit_batch($1) FROM dtp_s12.jobs j WHERE j.x = 1',
    );
    assert.equal(inSchema(sql, 'dtp'), sql);
  });

  it('refuses a schema name that is not dtp or dtp_s<n> (it is spliced into SQL)', () => {
    for (const bad of ['public', 'dtp_s', 'dtp_s12345', 'dtp_s1; DROP SCHEMA dtp', 'DTP', '']) {
      assert.throws(() => checkedSchema(bad), RangeError, bad);
    }
    assert.equal(checkedSchema('dtp_s1023'), 'dtp_s1023');
    assert.throws(
      () =>
        new PostgresLease({ url: 'postgres://127.0.0.1:1/x', operationTimeoutMs: 1, schema: 'x' }),
      RangeError,
    );
  });
});

describe('PostgreSQL shard schemas', { skip }, () => {
  it('keeps shards apart: a commit in dtp_s0 is not in dtp_s1, and only dtp_s0 is fenced by its takeover', async () => {
    const url = await newDatabase();
    const s0 = await openStore(url, 'dtp_s0', await lead(url, 'dtp_s0'));
    const s1 = await openStore(url, 'dtp_s1', await lead(url, 'dtp_s1'));
    await s0.commit(batchOf([{ job: jobRecord(1), isNew: true }]));
    assert.equal(await jobIn(s0, jobRecord(1).jobId), jobRecord(1).jobId);
    assert.equal(await jobIn(s1, jobRecord(1).jobId), null);

    // Another coordinator takes dtp_s0's lease over once it expired.
    await queryDatabase(url, "UPDATE dtp_s0.leader_lease SET expires_at = '-infinity'");
    assert.equal(await lead(url, 'dtp_s0', 'n2'), s0.epoch + 1);
    await assert.rejects(s0.commit(batchOf([{ job: jobRecord(2), isNew: true }])), LeaseLostError);
    await s1.commit(batchOf([{ job: jobRecord(2), isNew: true }]));
    assert.equal(await jobIn(s1, jobRecord(2).jobId), jobRecord(2).jobId);

    const rows = await queryDatabase<{ s0: number; s1: number; dtp: string | null }>(
      url,
      `SELECT (SELECT count(*)::integer FROM dtp_s0.jobs) AS s0,
              (SELECT count(*)::integer FROM dtp_s1.jobs) AS s1,
              to_regnamespace('dtp')::text AS dtp`,
    );
    // Nothing a shard's store or lease ran touched schema dtp.
    assert.deepEqual(rows, [{ s0: 1, s1: 1, dtp: null }]);
  });

  it('migrates the shard schemas to the newest version, once, with several callers at once', async () => {
    const url = await newDatabase();
    await Promise.all([1, 2, 3].map(() => ensureShardSchemas(url, 3)));
    await ensureShardSchemas(url, 3);
    const names = ['dtp_s0', 'dtp_s1', 'dtp_s2'];
    const rows = await queryDatabase<{ name: string; version: number; cluster: string | null }>(
      url,
      names
        .map(
          (name) => `SELECT '${name}' AS name, version,
                        to_regclass('${name}.cluster')::text AS cluster FROM ${name}.schema_version`,
        )
        .join(' UNION ALL '),
    );
    // One version row each, and the cluster's tables in dtp only.
    assert.deepEqual(
      rows,
      names.map((name) => ({ name, version: SCHEMA_VERSION, cluster: null })),
    );
  });
});

describe('the cluster outbox', { skip }, () => {
  it('writes a message with the batch that sends it and deletes it with the batch that applies it, each under its own shard’s fence', async () => {
    const url = await newDatabase();
    await claimShardCount(url, 2); // schema dtp, where the outbox is
    await ensureShardSchemas(url, 2);
    const s0 = await openStore(url, 'dtp_s0', await lead(url, 'dtp_s0'));
    const s1 = await openStore(url, 'dtp_s1', await lead(url, 'dtp_s1'));
    const watch = { type: 'watch', parentId: 'job-1', childId: 'c-1', childShard: 1 } as const;
    const create = { type: 'createJobs', jobs: [jobRecord(9, { seq: 0 })], watchers: [] } as const;
    await s0.commit({
      ...batchOf([{ job: jobRecord(1), isNew: true }]),
      outbox: [
        { targetShard: 1, body: create },
        { targetShard: 1, body: watch },
      ],
      remoteDependents: [{ parentId: 'job-1', childId: 'c-0', childShard: 1 }],
    });
    const sent = await s1.readOutbox(1, 0, 10);
    assert.deepEqual(
      sent.map((m) => [m.targetShard, m.body]),
      [
        [1, create],
        [1, watch],
      ],
      'in the order written, bodies as sent',
    );
    const [first, second] = sent as [OutboxMessage, OutboxMessage];
    assert.ok(first.id < second.id);
    assert.deepEqual(await s0.readOutbox(0, 0, 10), []);
    assert.deepEqual(await s1.readOutbox(1, first.id, 10), [sent[1]]);
    assert.deepEqual((await s0.recover()).remoteDependents, [
      { parentId: 'job-1', childId: 'c-0', childShard: 1 },
    ]);

    // Applied by shard 1, with a child that depends on a parent of shard 0.
    const ended = {
      parentId: 'job-1',
      taskType: 'SHA256',
      state: 'COMPLETED',
      result: 'r',
      resultFormat: null,
    } as const;
    await s1.commit({
      ...batchOf([{ job: jobRecord(2, { state: 'WAITING', dependsOn: ['job-1'] }), isNew: true }]),
      outboxDone: [first.id],
      remoteParents: [ended],
    });
    assert.deepEqual(await s1.readOutbox(1, 0, 10), [sent[1]]);
    assert.deepEqual((await s1.recover()).remoteParents, [ended]);
    // The outcome stays while a stored job depends on it, and goes with the last one.
    const child = jobRecord(2, { dependsOn: ['job-1'], state: 'COMPLETED', finishedAtMs: 5 });
    await s1.commit(batchOf([{ job: child, isNew: false }]));
    const remoteParents = async (): Promise<number> =>
      (
        await queryDatabase<{ n: number }>(
          url,
          'SELECT count(*)::int AS n FROM dtp_s1.remote_parents',
        )
      )[0]?.n ?? -1;
    assert.equal(await remoteParents(), 1);
    const purge = { state: 'COMPLETED', finishedBeforeMs: 10, limit: 10 } as const;
    assert.deepEqual(await s1.read({ op: 'purge', query: purge }), { op: 'purge', deleted: 1 });
    assert.equal(await remoteParents(), 0);
    await s0.commit({ ...batchOf([]), remoteDependentsDone: ['job-1'] });
    assert.equal((await s0.recover()).remoteDependents, undefined);

    // Shard 1 taken over: its old leader applies nothing more.
    await queryDatabase(url, "UPDATE dtp_s1.leader_lease SET expires_at = '-infinity'");
    await lead(url, 'dtp_s1', 'n2');
    await assert.rejects(s1.commit({ ...batchOf([]), outboxDone: [second.id] }), LeaseLostError);
    assert.deepEqual(await s0.readOutbox(1, 0, 10), [sent[1]], 'still there for the new leader');
  });
});

describe('the shards’ shared write connection', { skip }, () => {
  async function twoShards(): Promise<{
    url: string;
    writer: ShardWriter;
    stores: PostgresStore[];
  }> {
    const url = await newDatabase();
    await claimShardCount(url, 3);
    await ensureShardSchemas(url, 3);
    const writer = new ShardWriter(url, 'test-shard-writer');
    closers.push(writer);
    const stores = [
      await openStore(url, 'dtp_s0', await lead(url, 'dtp_s0'), writer),
      await openStore(url, 'dtp_s1', await lead(url, 'dtp_s1'), writer),
    ];
    return { url, writer, stores };
  }

  it('commits the parts of several shards given at once in one transaction, each in its schema', async () => {
    const { writer, stores } = await twoShards();
    const [s0, s1] = stores as [PostgresStore, PostgresStore];
    await Promise.all([
      s0.commit(batchOf([{ job: jobRecord(1), isNew: true }])),
      s1.commit(batchOf([{ job: jobRecord(2), isNew: true }])),
    ]);
    assert.deepEqual(writer.stats, { transactions: 1, parts: 2 });
    assert.equal(await jobIn(s0, 'job-1'), 'job-1');
    assert.equal(await jobIn(s0, 'job-2'), null);
    assert.equal(await jobIn(s1, 'job-2'), 'job-2');
    // A shard's later batches wait for its part in flight, and go together next.
    await Promise.all([
      s0.commit(batchOf([{ job: jobRecord(3), isNew: true }])),
      s0.commit(batchOf([{ job: jobRecord(4), isNew: true }])),
    ]);
    assert.equal(await jobIn(s0, 'job-4'), 'job-4');
  });

  it('gives a fenced shard its LeaseLostError alone: the other shard’s part of the same transaction commits', async () => {
    const { url, writer, stores } = await twoShards();
    const [s0, s1] = stores as [PostgresStore, PostgresStore];
    await queryDatabase(url, "UPDATE dtp_s1.leader_lease SET expires_at = '-infinity'");
    await lead(url, 'dtp_s1', 'n2');
    const [ok, fenced] = await Promise.allSettled([
      s0.commit(batchOf([{ job: jobRecord(1), isNew: true }])),
      s1.commit(batchOf([{ job: jobRecord(2), isNew: true }])),
    ]);
    assert.equal(ok.status, 'fulfilled');
    assert.ok(fenced.status === 'rejected' && fenced.reason instanceof LeaseLostError);
    assert.equal(await jobIn(s0, 'job-1'), 'job-1');
    assert.equal(await jobIn(s1, 'job-2'), null);
    // Tried together once, then each alone.
    assert.deepEqual(writer.stats, { transactions: 1, parts: 1 });
    // Shard 0 goes on writing through the same connection.
    await s0.commit(batchOf([{ job: jobRecord(3), isNew: true }]));
    assert.equal(await jobIn(s0, 'job-3'), 'job-3');
  });

  it('tells a listener the target shards of a commit with outbox messages, and every shard once it (re)connects', async () => {
    const { url, stores } = await twoShards();
    const [s0] = stores as [PostgresStore, PostgresStore];
    const told: (readonly number[] | null)[] = [];
    const listener = OutboxListener.start({
      url,
      arrived: (shards) => told.push(shards),
      retryMs: 20,
      logger: silentLogger(),
    });
    closers.push(listener);
    await until(() => told.length > 0, { what: 'the listener connected' });
    assert.deepEqual(told, [null], 'on connecting: any shard may have messages');
    const watch = { type: 'watch', parentId: 'job-1', childId: 'c-1', childShard: 2 } as const;
    await s0.commit({
      ...batchOf([{ job: jobRecord(1), isNew: true }]),
      outbox: [
        { targetShard: 2, body: watch },
        { targetShard: 1, body: watch },
        { targetShard: 2, body: watch },
      ],
    });
    await until(() => told.length > 1, { what: 'the notification' });
    assert.deepEqual(told[1], [1, 2]);
    // Its connection lost: it connects again and tells every shard to read.
    await queryDatabase(
      url,
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'dtp-outbox'",
    );
    await until(() => told.length > 2 && listener.listening, { what: 'listening again' });
    assert.equal(told[2], null);
  });
});

describe('claimShardCount', { skip }, () => {
  it('stores the first caller’s count and gives it to every later caller', async () => {
    const url = await newDatabase();
    assert.equal(await claimShardCount(url, 4), 4);
    assert.equal(await claimShardCount(url, 8), 4);
    assert.equal(await claimShardCount(url, 1), 4);
  });

  it('stores 1 for a database of schema 12 whose dtp.jobs has rows (an unsharded deployment)', async () => {
    const url = await newDatabase();
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await migrate(client, 12);
      await client.query(
        `INSERT INTO dtp.jobs (seq, job_id, task_type, payload, state, priority, attempts,
           max_attempts, timeout_ms, created_at_ms, updated_at_ms)
         VALUES ($1, $2, 'SHA256', '{}', 'QUEUED', 'NORMAL', 0, 3, 60000, $3, $3)`,
        [OLD_JOB.seq, OLD_JOB.jobId, OLD_JOB.createdAtMs],
      );
    } finally {
      await client.end();
    }
    assert.equal(await claimShardCount(url, 4), 1);
    assert.equal(await claimShardCount(url, 4), 1);
  });

  it('gives the same count to 4 callers claiming at once', async () => {
    const url = await newDatabase();
    const counts = await Promise.all([2, 3, 4, 5].map((shards) => claimShardCount(url, shards)));
    assert.equal(new Set(counts).size, 1);
    assert.ok([2, 3, 4, 5].includes(counts[0] as number));
  });

  it('refuses a count out of range', async () => {
    await assert.rejects(claimShardCount('postgres://127.0.0.1:1/none', 0), RangeError);
    await assert.rejects(claimShardCount('postgres://127.0.0.1:1/none', 1025), RangeError);
  });
});

describe('PostgresMembership', { skip }, () => {
  it('lists the live members, sorted by nodeId, and removes one that leaves at once', async () => {
    const url = await newDatabase();
    const [a, b, c] = [membershipOn(url), membershipOn(url), membershipOn(url)];
    await c.heartbeat(member('c'), 60_000);
    await a.heartbeat(member('a'), 60_000);
    const withHttp = { ...member('b'), httpAddress: 'b:8080' };
    assert.deepEqual(await b.heartbeat(withHttp, 60_000), [member('a'), withHttp, member('c')]);
    await a.leave('a');
    assert.deepEqual(await c.heartbeat(member('c'), 60_000), [withHttp, member('c')]);
  });

  it('drops a member that stops heartbeating once its ttl passed, and deletes it after 10 ttls', async () => {
    const url = await newDatabase();
    const [quiet, busy] = [membershipOn(url), membershipOn(url)];
    const ttlMs = 300;
    const sent = Date.now();
    await quiet.heartbeat(member('quiet'), ttlMs);
    const seen = await busy.heartbeat(member('busy'), 60_000);
    // (A machine so slow that one round trip took the whole ttl leaves nothing to check here.)
    if (Date.now() - sent < ttlMs) assert.deepEqual(seen, [member('busy'), member('quiet')]);
    await until(async () => (await busy.heartbeat(member('busy'), 60_000)).length === 1, {
      what: 'the quiet member to drop out',
      intervalMs: 20,
    });
    assert.ok(Date.now() - sent >= ttlMs - 5, 'not before its ttl');
    // Forgotten after 10 of the caller's ttls past its expiry.
    await until(
      async () => {
        await busy.heartbeat(member('busy'), ttlMs);
        const rows = await queryDatabase(
          url,
          "SELECT 1 FROM dtp.coordinators WHERE node_id = 'quiet'",
        );
        return rows.length === 0;
      },
      { what: 'the quiet member to be deleted', timeoutMs: 10_000, intervalMs: 50 },
    );
    assert.ok(Date.now() - sent >= 11 * ttlMs - 5, 'not before 10 ttls past its expiry');
  });
});

describe('readShardLeases', { skip }, () => {
  it('gives every shard’s lease, a shard without a schema yet as never taken', async () => {
    const url = await newDatabase();
    assert.deepEqual(await readShardLeases(url, 1), [
      { shard: 0, epoch: 0, holder: null, live: false },
    ]);
    await lead(url, 'dtp_s0', 'a');
    const b = leaseOn(url, 'dtp_s2');
    assert.deepEqual(await b.tryAcquire(holder('b'), 60_000), { acquired: true, epoch: 1 });
    const never = { epoch: 0, holder: null, live: false };
    assert.deepEqual(await readShardLeases(url, 4), [
      { shard: 0, epoch: 1, holder: holder('a'), live: true },
      { shard: 1, ...never },
      { shard: 2, epoch: 1, holder: holder('b'), live: true },
      { shard: 3, ...never },
    ]);
    await b.release('b', 1);
    await ensureShardSchemas(url, 4);
    assert.deepEqual(await readShardLeases(url, 4), [
      { shard: 0, epoch: 1, holder: holder('a'), live: true },
      { shard: 1, ...never },
      { shard: 2, epoch: 1, holder: null, live: false },
      { shard: 3, ...never },
    ]);
    // The sharded coordinator's round reads the same on its membership connection.
    const membership = new PostgresMembership({ url, operationTimeoutMs: 5_000 });
    try {
      const read = await membership.shardLeases(4);
      assert.deepEqual(
        read.map(({ leftMs: _, ...lease }) => lease),
        await readShardLeases(url, 4),
      );
      // With how long each lease has left: shard 0's (60 s, taken above), the others none.
      const left = read.map((lease) => lease.leftMs);
      assert.ok((left[0] as number) > 0 && (left[0] as number) <= 60_000, `${left[0]}`);
      assert.deepEqual(left.slice(1), [0, 0, 0]);
    } finally {
      await membership.close();
    }
  });
});
