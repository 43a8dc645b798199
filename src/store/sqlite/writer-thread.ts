/**
 * The SQLite store's writer thread (durability `full`): it owns the writing
 * connection, so commits and their fsyncs never stall the coordinator's event
 * loop. Protocol: writer-protocol.ts.
 *
 * All messages queued when the thread wakes are taken at once; consecutive
 * COMMITs become one transaction and one COMMITTED reply. After a failed
 * commit the writer refuses every later one (the coordinator stops anyway;
 * nothing may commit behind a hole).
 */
import { performance } from 'node:perf_hooks';
import { receiveMessageOnPort, workerData, type MessagePort } from 'node:worker_threads';
import type { Database } from 'better-sqlite3';
import { describeError } from '../../protocol/errors.js';
import { openDatabase } from './open.js';
import { migrate } from './schema.js';
import { SqliteWriter } from './writer.js';
import type { FromWriter, ToWriter, WriterData } from './writer-protocol.js';

const { data, port } = workerData as { data: WriterData; port: MessagePort };

function post(msg: FromWriter): void {
  port.postMessage(msg);
}

type Commit = Extract<ToWriter, { type: 'COMMIT' }>;

let db: Database;
let writer: SqliteWriter;
try {
  db = openDatabase(data.path, data.durability);
  migrate(db);
  writer = new SqliteWriter(db);
  post({ type: 'READY' });
} catch (err) {
  // The main thread terminates this thread when it reads this.
  post({ type: 'OPEN_FAILED', message: describeError(err) });
  throw err;
}

let failure: string | null = null;

function commitGroup(commits: Commit[]): void {
  if (commits.length === 0) return;
  const upTo = (commits.at(-1) as Commit).batchId;
  if (failure !== null) {
    post({ type: 'FAILED', message: failure });
    return;
  }
  const started = performance.now();
  try {
    writer.write(commits);
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
          post({ type: 'PURGED', requestId: msg.requestId, deleted: writer.purge(msg.query) });
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
