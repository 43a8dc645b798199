/**
 * Pending waits against a real coordinator: the caps per connection and in
 * all refuse only the requests beyond them (ERROR TOO_MANY_WAITS, the
 * connection stays open); the client library keeps waiting by polling while
 * the coordinator is full; another client is served throughout; a
 * connection's waits leave with it; and a connection whose requests pile up
 * behind its own waits has those waits answered early instead of stalling.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import type { ClientReply, ClientRequest } from '../../src/protocol/messages.js';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const HOUR_MS = 3_600_000;
let tc: TestCoordinator;
const peers: { close(): Promise<void> }[] = [];

afterEach(async () => {
  await Promise.all(peers.splice(0).map((p) => p.close()));
  await tc.close();
});

async function raw(): Promise<RawClient> {
  const client = await RawClient.connect(tc.coordinator.clientPort);
  peers.push(client);
  return client;
}

/** Sends every request at once, then collects `count` replies. */
async function pipeline(
  client: RawClient,
  requests: ClientRequest[],
  timeoutMs = 10_000,
): Promise<ClientReply[]> {
  for (const request of requests) client.conn.send(request);
  const replies: ClientReply[] = [];
  while (replies.length < requests.length) {
    replies.push((await client.inbox.next(timeoutMs)) as ClientReply);
  }
  return replies;
}

const waitFor = (jobId: string, timeoutMillis = HOUR_MS): ClientRequest => ({
  type: 'WAIT_JOB',
  jobId,
  timeoutMillis,
});

describe('coordinator: pending waits', () => {
  it('refuses waits beyond its caps, and only those; the library polls meanwhile', async () => {
    tc = await startCoordinator({ maxWaitsPerConnection: 3, maxWaits: 5 });
    const submitter = await raw();
    const jobId = await submitter.submit('SLEEP', { durationMillis: 1 });
    const holder = await raw();
    for (let k = 0; k < 2; k++) holder.conn.send(waitFor(jobId));
    const greedy = await raw();
    for (let k = 0; k < 4; k++) greedy.conn.send(waitFor(jobId)); // the 4th passes its own cap
    await until(() => tc.coordinator.inspect().pendingWaits === 5, { what: 'five waits held' });
    // Full: another connection's wait is refused at once, its other requests served.
    const late = await raw();
    const refused = await late.request(waitFor(jobId));
    assert.ok(refused.type === 'ERROR', JSON.stringify(refused));
    assert.equal(refused.code, 'TOO_MANY_WAITS');
    assert.match(refused.message, /on this coordinator \(limit 5\)/);
    assert.equal((await late.status(jobId)).state, 'QUEUED');
    // The library still waits, by polling, and sees the job end.
    const library = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
    peers.push(library);
    const waited = library.wait(jobId, 10_000);
    const worker = await ScriptedWorker.register(tc.coordinator.workerPort, 'w1', 1);
    peers.push(worker);
    worker.succeed(await worker.assignments.next(), 'done');
    assert.equal((await waited).state, 'COMPLETED');
    // The greedy connection gets its answers in order: three waits, then its refusal.
    const replies: ClientReply[] = [];
    for (let k = 0; k < 4; k++) replies.push((await greedy.inbox.next()) as ClientReply);
    assert.deepEqual(
      replies.map((r) =>
        r.type === 'ERROR' ? r.code : `${r.type} ${r.type === 'JOB_STATUS' ? r.job.state : ''}`,
      ),
      ['JOB_STATUS COMPLETED', 'JOB_STATUS COMPLETED', 'JOB_STATUS COMPLETED', 'TOO_MANY_WAITS'],
    );
    const last = replies[3];
    assert.ok(last?.type === 'ERROR');
    assert.match(last.message, /on this connection \(limit 3\)/);
    assert.equal((await greedy.status(jobId)).state, 'COMPLETED', 'the connection stays open');
  });

  it('drops the waits of a connection that closes, even one stuck behind its own waits', async () => {
    tc = await startCoordinator();
    const client = await raw();
    const jobId = await client.submit('SLEEP', { durationMillis: 1 });
    // Beyond its 10,000: the refusals queue behind the held waits, reading
    // stops, and a stopped socket would never see the close.
    const flood = await RawClient.connect(tc.coordinator.clientPort);
    for (let k = 0; k < 30_000; k++) flood.conn.send(waitFor(jobId));
    await until(() => flood.conn.outboundBytes === 0 && tc.coordinator.inspect().pendingWaits > 0, {
      timeoutMs: 20_000,
      what: 'every wait handed to the kernel, and some held',
    });
    assert.equal((await client.status(jobId)).state, 'QUEUED', 'another client is served');
    await flood.close();
    await until(() => tc.coordinator.inspect().pendingWaits === 0, {
      timeoutMs: 20_000,
      what: 'the waits dropped',
    });
    assert.equal((await client.status(jobId)).state, 'QUEUED');
  });

  it('answers a connection’s waits early when its other requests pile up behind them', async () => {
    tc = await startCoordinator();
    const client = await raw();
    const jobId = await client.submit('SLEEP', { durationMillis: 1 });
    // Replies leave in request order: 1,100 status requests behind two held
    // waits would stop the connection being read for an hour.
    const requests: ClientRequest[] = [waitFor(jobId), waitFor(jobId)];
    for (let k = 0; k < 1_100; k++) requests.push({ type: 'GET_JOB_STATUS', jobId });
    const replies = await pipeline(client, requests);
    assert.equal(replies.length, 1_102);
    assert.ok(replies.every((r) => r.type === 'JOB_STATUS' && r.job.state === 'QUEUED'));
    assert.equal(tc.coordinator.inspect().pendingWaits, 0);
  });
});
