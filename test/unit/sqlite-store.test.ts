/**
 * The SQLite store: schema creation and versioning, staged writes and commits,
 * the merge of staged and committed rows in listJobs (against a model and the
 * MemoryStore), the idempotency-key index, recovery reads, and failed commits.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import fc from 'fast-check';
import { JOB_STATES, isTerminalState, type JobState } from '../../src/protocol/messages.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { SCHEMA_VERSION } from '../../src/store/schema.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { StoreError, type JobRecord, type ListQuery, type Store } from '../../src/store/store.js';
import { jobRecord } from '../helpers/job-record.js';

const tempDir = mkdtempSync(join(tmpdir(), 'dtp-sqlite-store-'));
const opened: Store[] = [];
let fileCount = 0;

after(() => {
  for (const store of opened) store.close();
  rmSync(tempDir, { recursive: true, force: true });
});

function freshPath(): string {
  return join(tempDir, `store-${fileCount++}`, 'jobs.sqlite');
}

function open(path: string): SqliteStore {
  const store = new SqliteStore({ path });
  opened.push(store);
  return store;
}

function userVersion(path: string): number {
  const db = new BetterSqlite3(path, { readonly: true });
  try {
    return db.pragma('user_version', { simple: true }) as number;
  } finally {
    db.close();
  }
}

const record = jobRecord;

function assertStoreError(fn: () => unknown, message: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof StoreError, `expected StoreError, got ${String(err)}`);
    assert.equal(err.code, 'STORE_FAILED');
    assert.match(err.message, message);
    return true;
  });
}

describe('SqliteStore schema', () => {
  it('creates the schema with the current user_version when the file is new', () => {
    const path = freshPath();
    const store = open(path);
    assert.equal(store.maxSeq(), 0);
    assert.deepEqual(store.loadActiveJobs(), []);
    store.close();
    assert.equal(userVersion(path), SCHEMA_VERSION);
    assert.ok(SCHEMA_VERSION >= 1);
  });

  it('opens an existing database with its rows when opened again', () => {
    const path = freshPath();
    const first = open(path);
    first.insertJob(record(1));
    first.commit();
    first.close();
    const again = open(path);
    assert.deepEqual(again.getJob('job-1'), record(1));
    assert.equal(userVersion(path), SCHEMA_VERSION);
  });

  it('refuses with StoreError when the schema is newer than the code', () => {
    const path = freshPath();
    open(path).close();
    const db = new BetterSqlite3(path);
    db.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    db.close();
    assertStoreError(() => open(path), /newer/);
  });

  it('throws StoreError when the path cannot hold a database', () => {
    const path = freshPath();
    open(path).close();
    assertStoreError(() => open(join(path, 'inside-a-file.sqlite')), /cannot open/);
  });

  it('closes idempotently when close is called twice', () => {
    const store = open(freshPath());
    store.close();
    store.close();
  });
});

describe('SqliteStore writes', () => {
  it('round-trips every field when a job is inserted, updated and committed', () => {
    const path = freshPath();
    const store = open(path);
    const job = record(1, { idempotencyKey: 'k', priority: 'HIGH' });
    store.insertJob(job);
    store.commit();
    assert.deepEqual(store.getJob('job-1'), job);
    const running = {
      ...job,
      state: 'RUNNING' as const,
      attempts: 1,
      workerId: 'w1',
      attemptId: 'a1',
      deadlineAtMs: 9_999,
      error: 'earlier',
      updatedAtMs: 5_000,
    };
    store.updateJob(running);
    store.commit();
    store.close();
    const again = open(path);
    assert.deepEqual(again.getJob('job-1'), running);
    assert.deepEqual(again.getJobByIdempotencyKey('k'), running);
    assert.equal(again.getJob('nope'), undefined);
    assert.equal(again.getJobByIdempotencyKey('nope'), undefined);
  });

  it('shows staged rows to reads when they are not committed yet', () => {
    const path = freshPath();
    const store = open(path);
    store.insertJob(record(1, { idempotencyKey: 'a' }));
    store.commit();
    store.insertJob(record(2, { idempotencyKey: 'b' }));
    store.updateJob(record(1, { idempotencyKey: 'a', state: 'CANCELLED' }));
    assert.equal(store.pendingCount, 2);
    assert.equal(store.getJob('job-2')?.seq, 2);
    assert.equal(store.getJobByIdempotencyKey('b')?.jobId, 'job-2');
    assert.equal(store.getJob('job-1')?.state, 'CANCELLED');
    assert.equal(store.getJobByIdempotencyKey('a')?.state, 'CANCELLED');
    assert.equal(store.maxSeq(), 2);
    assert.deepEqual(
      store.loadActiveJobs(),
      [record(1, { idempotencyKey: 'a' })],
      'committed only',
    );
    store.close();
    const again = open(path);
    assert.equal(again.getJob('job-2'), undefined, 'close does not commit');
    assert.equal(again.getJob('job-1')?.state, 'QUEUED');
  });

  it('coalesces an insert and its updates into one insert when they share a batch', () => {
    const store = open(freshPath());
    store.insertJob(record(1));
    store.updateJob(record(1, { state: 'RUNNING', attempts: 1 }));
    store.updateJob(record(1, { state: 'COMPLETED', attempts: 1, result: 'r' }));
    assert.equal(store.pendingCount, 1);
    store.commit();
    assert.equal(store.pendingCount, 0);
    assert.equal(store.getJob('job-1')?.result, 'r');
  });

  it('loads only non-terminal jobs in seq order when recovering', () => {
    const store = open(freshPath());
    const states: JobState[] = [
      'COMPLETED',
      'RUNNING',
      'FAILED',
      'QUEUED',
      'CANCELLED',
      'RETRY_WAIT',
    ];
    for (const seq of [6, 2, 5, 1, 4, 3]) {
      store.insertJob(record(seq, { state: states[seq - 1] as JobState }));
    }
    store.commit();
    assert.deepEqual(
      store.loadActiveJobs().map((j) => [j.seq, j.state]),
      [
        [2, 'RUNNING'],
        [4, 'QUEUED'],
        [6, 'RETRY_WAIT'],
      ],
    );
    assert.equal(store.maxSeq(), 6);
  });

  it('throws StoreError and writes nothing of the batch when an idempotency key repeats', () => {
    const path = freshPath();
    const store = open(path);
    store.insertJob(record(1, { idempotencyKey: 'dup' }));
    store.commit();
    store.insertJob(record(2));
    store.insertJob(record(3, { idempotencyKey: 'dup' }));
    assertStoreError(() => store.commit(), /UNIQUE/);
    store.close();
    const again = open(path);
    assert.equal(again.getJob('job-2'), undefined, 'the batch is atomic');
    assert.equal(again.maxSeq(), 1);
  });

  it('throws StoreError when the database was closed underneath', () => {
    const store = open(freshPath());
    store.insertJob(record(1));
    store.close();
    assertStoreError(() => store.commit(), /commit of 1 job/);
  });

  it('throws StoreError when another connection removed the table underneath', () => {
    const path = freshPath();
    const store = open(path);
    store.insertJob(record(1));
    store.commit();
    const other = new BetterSqlite3(path);
    other.exec('DROP TABLE jobs');
    other.close();
    store.updateJob(record(1, { state: 'CANCELLED' }));
    assertStoreError(() => store.commit(), /failed/);
    assertStoreError(() => store.loadActiveJobs(), /read failed/);
    assert.equal(store.pendingCount, 1, 'the batch stays staged');
  });
});

describe('MemoryStore', () => {
  it('throws StoreError when commits are made to fail, and recovers when allowed again', () => {
    const store = new MemoryStore();
    store.insertJob(record(1));
    store.failCommits('disk full');
    assertStoreError(() => store.commit(), /disk full/);
    store.failCommits(null);
    store.commit();
    assert.equal(store.committedJobs().length, 1);
  });

  it('forgets staged rows but keeps committed ones when it crashes', () => {
    const store = new MemoryStore();
    store.insertJob(record(1));
    store.commit();
    store.insertJob(record(2));
    store.updateJob(record(1, { state: 'CANCELLED' }));
    store.crash();
    assert.equal(store.getJob('job-2'), undefined);
    assert.equal(store.getJob('job-1')?.state, 'QUEUED');
    assert.equal(store.maxSeq(), 1);
  });
});

type Op =
  | { kind: 'insert'; state: JobState }
  | { kind: 'update'; pick: number; state: JobState }
  | { kind: 'commit' }
  | { kind: 'list'; before: number | null; state: JobState | null; limit: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('insert' as const), state: fc.constantFrom(...JOB_STATES) }),
  fc.record({
    kind: fc.constant('update' as const),
    pick: fc.nat(),
    state: fc.constantFrom(...JOB_STATES),
  }),
  fc.record({ kind: fc.constant('commit' as const) }),
  fc.record({
    kind: fc.constant('list' as const),
    before: fc.option(fc.integer({ min: 1, max: 40 })),
    state: fc.option(fc.constantFrom(...JOB_STATES)),
    limit: fc.integer({ min: 1, max: 12 }),
  }),
);

describe('SqliteStore listJobs', () => {
  it('matches a model and the MemoryStore when staged and committed rows mix', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 60 }), (ops) => {
        const sqlite = new SqliteStore({ path: ':memory:' });
        const memory = new MemoryStore();
        const latest = new Map<string, JobRecord>();
        try {
          for (const op of ops) {
            if (op.kind === 'insert') {
              const job = record(latest.size + 1, { state: op.state });
              latest.set(job.jobId, job);
              sqlite.insertJob({ ...job });
              memory.insertJob({ ...job });
            } else if (op.kind === 'update') {
              const old = [...latest.values()][op.pick % Math.max(1, latest.size)];
              if (old === undefined) continue;
              const job = { ...old, state: op.state, updatedAtMs: old.updatedAtMs + 1 };
              latest.set(job.jobId, job);
              sqlite.updateJob({ ...job });
              memory.updateJob({ ...job });
            } else if (op.kind === 'commit') {
              sqlite.commit();
              memory.commit();
            } else {
              const query: ListQuery = { beforeSeq: op.before, state: op.state, limit: op.limit };
              const expected = [...latest.values()]
                .filter((j) => query.beforeSeq === null || j.seq < query.beforeSeq)
                .filter((j) => query.state === null || j.state === query.state)
                .sort((a, b) => b.seq - a.seq)
                .slice(0, query.limit);
              assert.deepEqual(sqlite.listJobs(query), expected);
              assert.deepEqual(memory.listJobs(query), expected);
            }
          }
          sqlite.commit();
          const active = [...latest.values()].filter((j) => !isTerminalState(j.state));
          assert.deepEqual(sqlite.loadActiveJobs(), active);
        } finally {
          sqlite.close();
        }
      }),
      { numRuns: 150, seed: 2024 },
    );
  });
});
