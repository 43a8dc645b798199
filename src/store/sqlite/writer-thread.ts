/**
 * The SQLite store's writer: a worker thread that owns the only writing
 * connection, so commits (and their fsyncs under `--durability full`) never
 * stall the coordinator's event loop. Protocol: writer-protocol.ts.
 *
 * All messages queued when the thread wakes are taken at once; consecutive
 * COMMITs become one transaction and one COMMITTED reply. After a failed
 * commit the writer refuses every later one (the coordinator stops anyway;
 * nothing may commit behind a hole).
 */
import { performance } from 'node:perf_hooks';
import { receiveMessageOnPort, workerData, type MessagePort } from 'node:worker_threads';
import type { Database, Statement } from 'better-sqlite3';
import { describeError } from '../../protocol/errors.js';
import {
  ATTEMPT_COLUMNS,
  JOB_COLUMNS,
  JOB_MUTABLE_COLUMNS,
  columnList,
  type SqlValue,
} from './rows.js';
import { openDatabase } from './open.js';
import { migrate } from './schema.js';
import type { FromWriter, ToWriter, WriterData } from './writer-protocol.js';

const { data, port } = workerData as { data: WriterData; port: MessagePort };

function post(msg: FromWriter): void {
  port.postMessage(msg);
}

interface Statements {
  insert: Statement<SqlValue[]>;
  update: Statement<SqlValue[]>;
  attempt: Statement<SqlValue[]>;
  purgeSelect: Statement<[string, number, number], { seq: number; job_id: string }>;
  purgeAttempts: Statement<[string]>;
  purgeJob: Statement<[number]>;
}

function prepare(db: Database): Statements {
  const placeholders = (n: number): string => Array.from({ length: n }, () => '?').join(', ');
  return {
    insert: db.prepare(
      `INSERT INTO jobs (${columnList(JOB_COLUMNS)}) VALUES (${placeholders(JOB_COLUMNS.length)})`,
    ),
    update: db.prepare(
      `UPDATE jobs SET ${JOB_MUTABLE_COLUMNS.map((c) => `${c} = ?`).join(', ')} WHERE seq = ?`,
    ),
    attempt: db.prepare(
      `INSERT OR REPLACE INTO attempts (${columnList(ATTEMPT_COLUMNS)}) VALUES (${placeholders(ATTEMPT_COLUMNS.length)})`,
    ),
    purgeSelect: db.prepare(
      `SELECT seq, job_id FROM jobs WHERE state = ? AND finished_at_ms < ? ORDER BY finished_at_ms LIMIT ?`,
    ),
    purgeAttempts: db.prepare('DELETE FROM attempts WHERE job_id = ?'),
    purgeJob: db.prepare('DELETE FROM jobs WHERE seq = ?'),
  };
}

type Commit = Extract<ToWriter, { type: 'COMMIT' }>;

let db: Database;
let st: Statements;
try {
  db = openDatabase(data.path, data.durability);
  migrate(db);
  st = prepare(db);
  post({ type: 'READY' });
} catch (err) {
  // The main thread terminates this thread when it reads this.
  post({ type: 'OPEN_FAILED', message: describeError(err) });
  throw err;
}

let failure: string | null = null;

const writeAll = db.transaction((commits: Commit[]) => {
  for (const commit of commits) {
    for (const values of commit.inserts) st.insert.run(...values);
    for (const values of commit.updates) {
      const info = st.update.run(...values);
      if (info.changes !== 1)
        throw new Error(`update of job seq ${String(values.at(-1))} changed ${info.changes} rows`);
    }
    for (const values of commit.attempts) st.attempt.run(...values);
  }
});

const purgeSome = db.transaction(
  (query: { state: string; finishedBeforeMs: number; limit: number }) => {
    const rows = st.purgeSelect.all(query.state, query.finishedBeforeMs, query.limit);
    for (const row of rows) {
      st.purgeAttempts.run(row.job_id);
      st.purgeJob.run(row.seq);
    }
    return rows.length;
  },
);

function commitGroup(commits: Commit[]): void {
  if (commits.length === 0) return;
  const upTo = (commits.at(-1) as Commit).batchId;
  if (failure !== null) {
    post({ type: 'FAILED', message: failure });
    return;
  }
  const started = performance.now();
  try {
    writeAll(commits);
  } catch (err) {
    failure = `commit of batches ${commits[0]?.batchId}..${upTo} failed: ${describeError(err)}`;
    post({ type: 'FAILED', message: failure });
    return;
  }
  post({ type: 'COMMITTED', upTo, durationMs: performance.now() - started });
}

function handle(messages: ToWriter[]): void {
  let commits: Commit[] = [];
  for (const msg of messages) {
    switch (msg.type) {
      case 'COMMIT':
        commits.push(msg);
        break;
      case 'PURGE':
        commitGroup(commits);
        commits = [];
        try {
          post({ type: 'PURGED', requestId: msg.requestId, deleted: purgeSome(msg.query) });
        } catch (err) {
          post({ type: 'PURGE_FAILED', requestId: msg.requestId, message: describeError(err) });
        }
        break;
      case 'CLOSE':
        commitGroup(commits);
        db.close();
        port.close();
        return;
    }
  }
  commitGroup(commits);
}

port.on('message', (first: ToWriter) => {
  const messages = [first];
  for (
    let next = receiveMessageOnPort(port);
    next !== undefined;
    next = receiveMessageOnPort(port)
  ) {
    messages.push(next.message as ToWriter);
  }
  handle(messages);
});
