/**
 * The store contract on SQLite files, plus what only SQLite has: the schema
 * and its migrations, the writer thread, and failures of the file itself.
 */
import assert from 'node:assert/strict';
import {
  closeSync,
  mkdtempSync,
  openSync,
  readSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import {
  ATTEMPT_COLUMNS,
  JOB_COLUMNS,
  QUEUE_COLUMNS,
  attemptValues,
  dependencyValues,
  groupHoldValues,
  jobInsertValues,
  queueValues,
  type SqlValue,
} from '../../src/store/sqlite/rows.js';
import { SCHEMA_VERSION, migrate } from '../../src/store/sqlite/schema.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { StoreError } from '../../src/store/store.js';
import { jobRecord } from '../helpers/job-record.js';
import { batchOf, describeStoreContract } from '../helpers/store-contract.js';
import { OLD_JOB, SCHEMA_11, checkUpgraded, checkUpgradedFrom11 } from '../helpers/upgrade.js';

const dir = mkdtempSync(join(tmpdir(), 'dtp-store-sqlite-'));
let files = 0;
const pathOf = new WeakMap<object, string>();

for (const writer of ['inline', 'thread'] as const) {
  describeStoreContract({
    name: `SqliteStore (${writer} writer)`,
    async open() {
      const path = join(dir, `contract-${files++}.sqlite`);
      const store = await SqliteStore.open({ path, writer });
      pathOf.set(store, path);
      return store;
    },
    async reopen(store) {
      const path = pathOf.get(store) as string;
      const again = await SqliteStore.open({ path, writer });
      pathOf.set(again, path);
      return again;
    },
  });
}

after(() => rmSync(dir, { recursive: true, force: true }));

/** The WAL header's checkpoint sequence number (bytes 12..15): it counts the WAL's rewinds. */
function walRewinds(path: string): number {
  const fd = openSync(`${path}-wal`, 'r');
  try {
    const header = Buffer.alloc(16);
    readSync(fd, header, 0, 16, 0);
    return header.readUInt32BE(12);
  } finally {
    closeSync(fd);
  }
}

/**
 * Commits `batches` batches of 20 new jobs of 1 KB payloads, 1 ms apart (as a
 * coordinator's commits come, with gaps); `seq` counts the jobs made. Answers
 * the slowest commit, in ms.
 */
async function commitStream(
  store: SqliteStore,
  seq: { next: number },
  batches: number,
): Promise<number> {
  let slowest = 0;
  for (let i = 0; i < batches; i++) {
    const jobs = Array.from({ length: 20 }, () => ({
      job: jobRecord(++seq.next, { payloadJson: STREAM_PAYLOAD }),
      isNew: true,
    }));
    const startedMs = performance.now();
    await store.commit(batchOf(jobs));
    slowest = Math.max(slowest, performance.now() - startedMs);
    await new Promise<void>((resolve) => setTimeout(resolve, 1));
  }
  return slowest;
}

const STREAM_PAYLOAD = JSON.stringify({ text: 'x'.repeat(1_000) });

describe('SqliteStore file', () => {
  it('creates the schema at the current version when the file is new', async () => {
    const path = join(dir, 'schema.sqlite');
    const store = await SqliteStore.open({ path });
    await store.close();
    const db = new BetterSqlite3(path, { readonly: true });
    assert.equal(db.pragma('user_version', { simple: true }), SCHEMA_VERSION);
    assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
    db.close();
  });

  for (let from = 1; from < SCHEMA_VERSION; from++) {
    it(`upgrades a file of schema ${from}, keeping its jobs and taking every later column`, async () => {
      const path = join(dir, `upgrade-${from}.sqlite`);
      const db = new BetterSqlite3(path);
      migrate(db, from);
      db.prepare(
        `INSERT INTO jobs (seq, job_id, task_type, payload, state, priority, attempts,
           max_attempts, timeout_ms, created_at_ms, updated_at_ms)
         VALUES (?, ?, 'SHA256', '{}', 'QUEUED', 'NORMAL', 0, 3, 60000, ?, ?)`,
      ).run(OLD_JOB.seq, OLD_JOB.jobId, OLD_JOB.createdAtMs, OLD_JOB.createdAtMs);
      db.close();
      await checkUpgraded(() => SqliteStore.open({ path }));
    });
  }

  it('upgrades a file of schema 11 holding a row of every table, keeping each whole', async () => {
    const path = join(dir, 'upgrade-full-11.sqlite');
    const db = new BetterSqlite3(path);
    migrate(db, 11);
    const insert = (table: string, columns: readonly string[], values: SqlValue[]): void => {
      const marks = columns.map(() => '?').join(', ');
      db.prepare(`INSERT INTO ${table} (${columns.join(', ')}) VALUES (${marks})`).run(...values);
    };
    for (const job of [SCHEMA_11.oldJob, SCHEMA_11.newJob]) {
      insert('jobs', JOB_COLUMNS, jobInsertValues(job));
      for (const link of dependencyValues(job)) {
        insert('job_dependencies', ['parent_id', 'job_id'], link);
      }
    }
    insert('attempts', ATTEMPT_COLUMNS, attemptValues(SCHEMA_11.attempt));
    const { jobId, index, name, result, atMs } = SCHEMA_11.step;
    insert(
      'job_steps',
      ['job_id', 'idx', 'name', 'result', 'at_ms'],
      [jobId, index, name, result, atMs],
    );
    insert('queue_settings', QUEUE_COLUMNS, queueValues(SCHEMA_11.queue));
    insert('group_holds', ['queue', 'group_key', 'until_ms'], groupHoldValues(SCHEMA_11.hold));
    db.close();
    await checkUpgradedFrom11(() => SqliteStore.open({ path }));
  });

  it('refuses with StoreError when the schema is newer than the code', async () => {
    const path = join(dir, 'newer.sqlite');
    const db = new BetterSqlite3(path);
    db.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    db.close();
    await assert.rejects(SqliteStore.open({ path }), (err: unknown) => {
      assert.ok(err instanceof StoreError);
      assert.match(err.message, /newer than this coordinator understands/);
      return true;
    });
  });

  it('refuses with StoreError when the path cannot hold a database', async () => {
    const file = join(dir, 'a-file');
    writeFileSync(file, 'not a folder');
    await assert.rejects(SqliteStore.open({ path: join(file, 'db.sqlite') }), StoreError);
  });

  it('closes idempotently and refuses commits once closed', async () => {
    const store = await SqliteStore.open({ path: join(dir, 'closed.sqlite') });
    await Promise.all([store.close(), store.close()]);
    await assert.rejects(store.commit(batchOf([{ job: jobRecord(1), isNew: true }])), StoreError);
  });

  it('fails every later commit once one failed, and says why', async () => {
    const path = join(dir, 'broken.sqlite');
    const store = await SqliteStore.open({ path });
    await store.commit(batchOf([{ job: jobRecord(1), isNew: true }]));
    const other = new BetterSqlite3(path);
    other.exec('DROP TABLE jobs');
    other.close();
    await assert.rejects(store.commit(batchOf([{ job: jobRecord(2), isNew: true }])), /failed/);
    await assert.rejects(store.commit(batchOf([{ job: jobRecord(3), isNew: true }])), StoreError);
    await store.close();
  });

  it('rewinds the WAL under a steady stream of commits, so its file stays bounded', async () => {
    // Passive checkpoints alone never let SQLite start the WAL over while
    // commits keep coming: the file grew by every page of every commit.
    const path = join(dir, 'steady.sqlite');
    const restartBytes = 256 * 1024;
    const store = await SqliteStore.open({
      path,
      durability: 'normal',
      checkpoints: { intervalMs: 20, restartBytes },
    });
    const seq = { next: 0 };
    const deadline = Date.now() + 20_000;
    try {
      await commitStream(store, seq, 1);
      // Until the checkpoint thread has started (tens of ms, far more on a
      // loaded machine) the WAL grows with every commit, and a WAL file never
      // shrinks. So the bound is on its growth once the first rewind shows
      // the checkpoints are running.
      const first = walRewinds(path);
      while (walRewinds(path) === first && Date.now() < deadline) await commitStream(store, seq, 1);
      assert.notEqual(walRewinds(path), first, 'the WAL was never rewound');
      const base = statSync(`${path}-wal`).size;
      const from = seq.next;
      let largest = base;
      // Payload bytes: without rewinds the WAL would grow by more than these.
      const enough = 24 * 2 ** 20;
      const written = (): number => (seq.next - from) * STREAM_PAYLOAD.length;
      while ((walRewinds(path) - first < 4 || written() < enough) && Date.now() < deadline) {
        await commitStream(store, seq, 1);
        largest = Math.max(largest, statSync(`${path}-wal`).size);
      }
      const rewound = walRewinds(path) - first;
      assert.ok(rewound >= 4, `the WAL was rewound ${rewound} times`);
      assert.ok(written() >= enough, `only ${written()} bytes of payload were written`);
      assert.ok(
        largest - base < 8 * 2 ** 20,
        `the WAL file grew from ${base} to ${largest} bytes after its first rewind`,
      );
    } finally {
      await store.close();
    }
  });

  it('holds no commit off while a reader keeps an old snapshot (a backup)', async () => {
    // A RESTART that waited for the reader would hold the writer lock
    // meanwhile: every commit would wait in its busy handler, up to seconds.
    const path = join(dir, 'reader.sqlite');
    const store = await SqliteStore.open({
      path,
      durability: 'normal',
      checkpoints: { intervalMs: 10, restartBytes: 64 * 1024 },
    });
    const seq = { next: 0 };
    const reader = new BetterSqlite3(path, { readonly: true });
    try {
      await commitStream(store, seq, 20); // the WAL is over its restart size from here on
      // A commit just before, so the reader's snapshot is in the WAL (not only the file).
      await store.commit(batchOf([{ job: jobRecord(++seq.next), isNew: true }]));
      reader.exec('BEGIN');
      reader.prepare('SELECT count(*) FROM jobs').get(); // holds this snapshot until COMMIT
      const before = walRewinds(path);
      const slowest = await commitStream(store, seq, 200);
      assert.ok(slowest < 1_000, `a commit took ${slowest.toFixed(0)} ms`);
      // Once the reader is done, the next checkpoints rewind it again.
      reader.exec('COMMIT');
      const deadline = Date.now() + 20_000;
      while (walRewinds(path) === before && Date.now() < deadline)
        await commitStream(store, seq, 5);
      assert.notEqual(walRewinds(path), before, 'the WAL was not rewound after the reader');
    } finally {
      if (reader.inTransaction) reader.exec('COMMIT');
      reader.close();
      await store.close();
    }
  });

  it('answers a failed read with StoreError and keeps serving', async () => {
    const path = join(dir, 'read-fail.sqlite');
    const store = await SqliteStore.open({ path });
    await store.commit(batchOf([{ job: jobRecord(1), isNew: true }]));
    const other = new BetterSqlite3(path);
    other.exec('ALTER TABLE jobs RENAME TO jobs_gone');
    await assert.rejects(
      store.read({ op: 'job', jobId: 'job-1', withAttempts: false }),
      StoreError,
    );
    other.exec('ALTER TABLE jobs_gone RENAME TO jobs');
    other.close();
    const back = await store.read({ op: 'job', jobId: 'job-1', withAttempts: false });
    assert.equal(back.op === 'job' ? back.job?.jobId : null, 'job-1');
    await store.close();
  });
});
