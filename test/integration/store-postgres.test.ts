/**
 * The store contract on PostgreSQL (in schema `dtp`, and once more in a
 * shard's schema), plus what only PostgreSQL has: the schema and its
 * migrations, fencing by the lease epoch, and the lease record itself.
 * What only shards have is in store-postgres-shards.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { LeaseLostError } from '../../src/store/lease.js';
import { PostgresLease } from '../../src/store/postgres/postgres-lease.js';
import { PostgresStore, mergeBatches } from '../../src/store/postgres/postgres-store.js';
import { SCHEMA_VERSION, migrate } from '../../src/store/postgres/schema.js';
import { StoreError } from '../../src/store/store.js';
import { jobRecord } from '../helpers/job-record.js';
import {
  createTestDatabase,
  dropTestDatabase,
  postgresSkip,
  queryDatabase,
} from '../helpers/postgres.js';
import { batchOf, describeStoreContract } from '../helpers/store-contract.js';
import { eventRecord, signalRecord, triggerRecord } from '../helpers/store-contract-signals.js';
import { OLD_JOB, SCHEMA_11, checkUpgraded, checkUpgradedFrom11 } from '../helpers/upgrade.js';

const skip = postgresSkip();
const databases: string[] = [];
const urlOf = new WeakMap<object, string>();
const leases: PostgresLease[] = [];

const holder = (nodeId: string) => ({
  nodeId,
  workerAddress: `${nodeId}:7070`,
  clientAddress: `${nodeId}:7071`,
});

async function newDatabase(): Promise<string> {
  const url = await createTestDatabase();
  databases.push(url);
  return url;
}

/** A lease on `url` (in `schema`, default `dtp`) taken by `nodeId`; returns its epoch. */
async function lead(url: string, nodeId = 'n1', schema?: string): Promise<number> {
  const lease = new PostgresLease({ url, operationTimeoutMs: 5_000, schema });
  leases.push(lease);
  const got = await lease.tryAcquire(holder(nodeId), 60_000);
  assert.ok(got.acquired);
  return got.epoch;
}

async function openLeading(url: string, schema?: string): Promise<PostgresStore> {
  const store = await PostgresStore.open({ url, epoch: await lead(url, 'n1', schema), schema });
  urlOf.set(store, url);
  return store;
}

after(async () => {
  await Promise.all(leases.map((lease) => lease.close()));
  for (const url of databases) await dropTestDatabase(url);
});

if (skip === false) {
  describeStoreContract({
    name: 'PostgresStore',
    async open() {
      return openLeading(await newDatabase());
    },
    async reopen(store) {
      const url = urlOf.get(store) as string;
      const again = await PostgresStore.open({ url, epoch: (store as PostgresStore).epoch });
      urlOf.set(again, url);
      return again;
    },
  });
  // A shard's schema: the same statements rewritten, fenced by that schema's own lease.
  describeStoreContract({
    name: 'PostgresStore in a shard schema (dtp_s1)',
    async open() {
      return openLeading(await newDatabase(), 'dtp_s1');
    },
    async reopen(store) {
      const url = urlOf.get(store) as string;
      const epoch = (store as PostgresStore).epoch;
      const again = await PostgresStore.open({ url, epoch, schema: 'dtp_s1' });
      urlOf.set(again, url);
      return again;
    },
  });
}

describe('PostgresStore database', { skip }, () => {
  let url = '';
  before(async () => {
    url = await newDatabase();
  });

  it('creates the schema at the current version when the database is new', async () => {
    const store = await openLeading(url);
    await store.close();
    const rows = await queryDatabase<{ version: number }>(
      url,
      'SELECT version FROM dtp.schema_version',
    );
    assert.deepEqual(rows, [{ version: SCHEMA_VERSION }]);
  });

  for (let from = 1; from < SCHEMA_VERSION; from++) {
    it(`upgrades a database of schema ${from}, keeping its jobs and taking every later column`, async () => {
      const old = await newDatabase();
      const client = new pg.Client({ connectionString: old });
      await client.connect();
      try {
        await migrate(client, from);
        await client.query(
          `INSERT INTO dtp.jobs (seq, job_id, task_type, payload, state, priority, attempts,
             max_attempts, timeout_ms, created_at_ms, updated_at_ms)
           VALUES ($1, $2, 'SHA256', '{}', 'QUEUED', 'NORMAL', 0, 3, 60000, $3, $3)`,
          [OLD_JOB.seq, OLD_JOB.jobId, OLD_JOB.createdAtMs],
        );
      } finally {
        await client.end();
      }
      const epoch = await lead(old);
      await checkUpgraded(() => PostgresStore.open({ url: old, epoch }));
    });
  }

  it('upgrades a database of schema 11 holding a row of every table, keeping each whole', async () => {
    const old = await newDatabase();
    const client = new pg.Client({ connectionString: old });
    await client.connect();
    try {
      await migrate(client, 11);
      // As a coordinator of schema 11 wrote them (no lease taken yet: epoch 0).
      await client.query(
        'SELECT dtp.commit_batch(0, $1, NULL, $2, NULL, NULL, $3, NULL, $4, $5, $6, NULL)',
        [
          JSON.stringify([SCHEMA_11.oldJob, SCHEMA_11.newJob]),
          JSON.stringify([SCHEMA_11.attempt]),
          JSON.stringify([SCHEMA_11.queue]),
          JSON.stringify([SCHEMA_11.step]),
          JSON.stringify([{ jobId: SCHEMA_11.newJob.jobId, targetId: OLD_JOB.jobId }]),
          JSON.stringify([SCHEMA_11.hold]),
        ],
      );
    } finally {
      await client.end();
    }
    const epoch = await lead(old);
    await checkUpgradedFrom11(() => PostgresStore.open({ url: old, epoch }));
  });

  it('refuses with StoreError when the schema is newer than the code', async () => {
    const newer = await newDatabase();
    await (await openLeading(newer)).close();
    await queryDatabase(newer, 'UPDATE dtp.schema_version SET version = $1', [SCHEMA_VERSION + 1]);
    await assert.rejects(PostgresStore.open({ url: newer, epoch: 1 }), (err: unknown) => {
      assert.ok(err instanceof StoreError);
      assert.match(err.message, /newer than this coordinator understands/);
      return true;
    });
  });

  it('refuses with StoreError, without the password, when the server cannot be reached', async () => {
    const bad = 'postgres://dtp:secret-pw@127.0.0.1:1/none';
    await assert.rejects(PostgresStore.open({ url: bad, epoch: 1 }), (err: unknown) => {
      assert.ok(err instanceof StoreError);
      assert.doesNotMatch(err.message, /secret-pw/);
      assert.match(err.message, /\*\*\*/);
      return true;
    });
  });

  it('refuses a commit with LeaseLostError and writes nothing once another coordinator took over', async () => {
    const db = await newDatabase();
    const store = await openLeading(db);
    await store.commit(batchOf([{ job: jobRecord(1), isNew: true }]));
    await queryDatabase(db, "UPDATE dtp.leader_lease SET expires_at = '-infinity'");
    const next = await lead(db, 'n2');
    assert.equal(next, store.epoch + 1);
    await assert.rejects(
      store.commit(batchOf([{ job: jobRecord(2), isNew: true }])),
      LeaseLostError,
    );
    await assert.rejects(
      store.commit(batchOf([{ job: jobRecord(3), isNew: true }])),
      LeaseLostError,
    );
    await assert.rejects(
      store.read({
        op: 'purge',
        query: { state: 'COMPLETED', finishedBeforeMs: 10, limit: 1 },
      }),
      LeaseLostError,
    );
    const seqs = await queryDatabase<{ seq: number }>(
      db,
      'SELECT seq::integer AS seq FROM dtp.jobs ORDER BY seq',
    );
    assert.deepEqual(seqs, [{ seq: 1 }]);
    await store.close();
  });

  it('fails every later commit with StoreError once one failed', async () => {
    const db = await newDatabase();
    const store = await openLeading(db);
    await queryDatabase(db, 'ALTER TABLE dtp.jobs ADD CONSTRAINT small CHECK (seq < 2)');
    await assert.rejects(store.commit(batchOf([{ job: jobRecord(5), isNew: true }])), /failed/);
    await assert.rejects(store.commit(batchOf([{ job: jobRecord(1), isNew: true }])), StoreError);
    await store.close();
  });

  it('puts batches given while a transaction runs into one later transaction', async () => {
    const db = await newDatabase();
    let transactions = 0;
    const store = await PostgresStore.open({
      url: db,
      epoch: await lead(db),
      onCommit: () => transactions++,
    });
    const commits = [];
    for (let seq = 1; seq <= 50; seq++) {
      commits.push(store.commit(batchOf([{ job: jobRecord(seq), isNew: true }])));
    }
    await Promise.all(commits);
    assert.ok(transactions < 50, `${transactions} transactions for 50 batches`);
    assert.equal((await store.recover()).activeJobs.length, 50);
    await store.close();
  });
});

describe('PostgresStore writer', { skip }, () => {
  it('commits a batch given right after the previous one resolved (no lost wake-up)', async () => {
    const store = await openLeading(await newDatabase());
    // One more promise hop than a plain await: the next commit is given after
    // the writer saw an empty queue, before its loop has ended.
    const commitOne = async (seq: number): Promise<void> => {
      await store.commit(batchOf([{ job: jobRecord(seq), isNew: true }]));
    };
    for (let seq = 1; seq <= 20; seq++) await commitOne(seq);
    assert.equal((await store.recover()).maxSeq, 20);
    await store.close();
  });
});

describe('mergeBatches', () => {
  it('keeps the latest version of each job, an insert staying an insert', () => {
    const first = jobRecord(1);
    const later = { ...first, state: 'RUNNING' as const, attempts: 1 };
    const merged = mergeBatches([
      batchOf([{ job: first, isNew: true }]),
      batchOf([
        { job: later, isNew: false },
        { job: jobRecord(2), isNew: false },
      ]),
    ]);
    assert.deepEqual(merged.inserts, [later]);
    assert.deepEqual(merged.updates, [jobRecord(2)]);
  });

  it('keeps the last word on each group hold: a hold a later bound ended becomes a deletion', () => {
    const merged = mergeBatches([
      { ...batchOf([]), groupHolds: [{ queue: 'q', groupKey: 'a', untilMs: 500 }] },
      {
        ...batchOf([]),
        groupHolds: [{ queue: 'q', groupKey: null, untilMs: 900 }],
        groupHoldsEndedBeforeMs: 600,
      },
      { ...batchOf([]), groupHoldsEndedBeforeMs: 550 },
      { ...batchOf([]), groupHolds: [{ queue: 'q', groupKey: 'b', untilMs: 100 }] },
    ]);
    assert.deepEqual(merged.groupHolds, [
      { queue: 'q', groupKey: 'a', untilMs: null },
      { queue: 'q', groupKey: null, untilMs: 900 },
      { queue: 'q', groupKey: 'b', untilMs: 100 },
    ]);
    assert.equal(merged.groupHoldsEndedBeforeMs, 600);
  });

  it('keeps the latest version of each signal, the last word on each trigger, and refuses an event written twice', () => {
    const merged = mergeBatches([
      {
        ...batchOf([]),
        signals: [signalRecord('j', 1), signalRecord('j', 2)],
        triggers: [triggerRecord('a'), triggerRecord('b')],
        events: [eventRecord('e1')],
      },
      {
        ...batchOf([]),
        signals: [signalRecord('j', 1, { consumed: true })],
        deletedTriggers: ['a', 'c'],
        events: [eventRecord('e2')],
      },
      { ...batchOf([]), triggers: [triggerRecord('c', { queue: 'later' })] },
    ]);
    assert.deepEqual(merged.signals, [
      signalRecord('j', 1, { consumed: true }),
      signalRecord('j', 2),
    ]);
    assert.deepEqual(merged.triggers, [triggerRecord('b'), triggerRecord('c', { queue: 'later' })]);
    assert.deepEqual(merged.deletedTriggers, ['a']);
    assert.deepEqual(
      merged.events.map((e) => e.eventId),
      ['e1', 'e2'],
    );
    assert.throws(
      () =>
        mergeBatches([
          { ...batchOf([]), events: [eventRecord('e1')] },
          { ...batchOf([]), events: [eventRecord('e1')] },
        ]),
      StoreError,
    );
  });

  it('refuses a job inserted twice', () => {
    assert.throws(
      () =>
        mergeBatches([
          batchOf([{ job: jobRecord(1), isNew: true }]),
          batchOf([{ job: jobRecord(1), isNew: true }]),
        ]),
      StoreError,
    );
  });
});

describe('PostgresLease', { skip }, () => {
  it('grants the lease to one holder at a time, with a growing epoch, and to another once it expired or was released', async () => {
    const db = await newDatabase();
    const a = new PostgresLease({ url: db, operationTimeoutMs: 5_000 });
    const b = new PostgresLease({ url: db, operationTimeoutMs: 5_000 });
    leases.push(a, b);
    const first = await a.tryAcquire(holder('a'), 60_000);
    assert.deepEqual(first, { acquired: true, epoch: 1 });
    const refused = await b.tryAcquire(holder('b'), 60_000);
    assert.deepEqual(refused, {
      acquired: false,
      current: { epoch: 1, holder: holder('a'), live: true },
    });
    assert.equal(await a.renew('a', 1, 60_000), true);
    assert.equal(await b.renew('b', 1, 60_000), false);
    await a.release('a', 1);
    assert.deepEqual(await b.tryAcquire(holder('b'), 1), { acquired: true, epoch: 2 });
    assert.equal(await a.renew('a', 1, 60_000), false);
    await queryDatabase(db, 'SELECT pg_sleep(0.01)');
    assert.deepEqual(await a.tryAcquire(holder('a'), 60_000), { acquired: true, epoch: 3 });
  });

  it('lets exactly one of several racing standbys take a free lease', async () => {
    const db = await newDatabase();
    const racers = Array.from(
      { length: 5 },
      () => new PostgresLease({ url: db, operationTimeoutMs: 5_000 }),
    );
    leases.push(...racers);
    const results = await Promise.all(
      racers.map((lease, k) => lease.tryAcquire(holder(`r${k}`), 60_000)),
    );
    assert.equal(results.filter((r) => r.acquired).length, 1);
  });
});
