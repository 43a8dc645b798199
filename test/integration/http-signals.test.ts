/**
 * Signals, events and triggers through the HTTP API on a real coordinator:
 * `POST /api/jobs/:id/signal` wakes a job that waits for it (its snapshot
 * says what it waits for) or is held by one that does not; `POST
 * /api/events` creates its triggers' jobs, wakes the jobs waiting for it
 * and answers a known event id with the first answer; `GET /api/triggers`
 * lists the triggers; bad bodies are 400s that name the field, unknown
 * jobs 404, ended jobs refused; bodies carry payloads past the other
 * endpoints' 64 KiB; with client tokens they need one.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import type { JobDetails } from '../../src/http/api.js';
import type { PublishResult, SignalResult, TriggersResult } from '../../src/http/signals-api.js';
import type { TaskAssign } from '../../src/protocol/messages.js';
import { HttpApi, type ErrorBody } from '../helpers/http-api.js';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import { startCoordinator, tempDir, type TestCoordinator } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

let tc: TestCoordinator;
let api: HttpApi;
let client: RawClient;
const workers: ScriptedWorker[] = [];

before(async () => {
  tc = await startCoordinator({ metricsPort: 0 });
  api = new HttpApi(tc.coordinator.httpPort as number);
  client = await RawClient.connect(tc.coordinator.clientPort);
});

afterEach(async () => {
  for (const w of workers.splice(0)) await w.close();
});

after(async () => {
  await client.close();
  await tc.close();
});

let typeCount = 0;

/** A job of a fresh task type, taken by a scripted worker of its own; the worker and the assignment. */
async function runningJob(): Promise<{
  jobId: string;
  worker: ScriptedWorker;
  assign: TaskAssign;
}> {
  const taskType = `SIGNALLED_${++typeCount}`;
  const worker = await ScriptedWorker.register(tc.coordinator.workerPort, `w-${taskType}`, 1, {
    taskTypes: [taskType],
    extensions: { steps: true },
  });
  workers.push(worker);
  assert.ok(worker.features.includes('signals'), 'the coordinator offers signals');
  const jobId = await client.submit(taskType, { n: 1 });
  return { jobId, worker, assign: await worker.assignments.next() };
}

/** The job's details once it is WAITING (the API shows every state; a v1 client sees QUEUED). */
async function waiting(jobId: string): Promise<JobDetails> {
  return until(
    async () => {
      const details = await api.ok<JobDetails>(`/api/jobs/${jobId}`);
      return details.job.state === 'WAITING' ? details : undefined;
    },
    { what: `${jobId} WAITING` },
  );
}

describe('HTTP API: POST /api/jobs/:id/signal', { timeout: 60_000 }, () => {
  it('wakes a job waiting for that signal, which gets it with its recorded steps', async () => {
    const { jobId, worker, assign } = await runningJob();
    worker.send({
      type: 'TASK_SUSPEND',
      workerId: worker.workerId,
      jobId,
      attemptId: assign.attemptId,
      waitForSignal: { name: 'approve' },
    });
    const details = await waiting(jobId);
    assert.deepEqual(details.job.waitingFor, { signal: 'approve', untilMillis: null });
    const payload = { by: 'ann', note: 'looks good' };
    const answer = await api.expect<SignalResult>('POST', `/api/jobs/${jobId}/signal`, 200, {
      name: 'approve',
      payload,
    });
    assert.deepEqual(answer, { jobId, name: 'approve', resumed: true, signalsHeld: 0 });
    const again = await worker.assignments.next();
    const step = again.steps?.at(-1);
    assert.equal(step?.name, 'dtp.waitForSignal');
    const value = JSON.parse(step?.result ?? 'null') as { signal: { payload: unknown } };
    assert.deepEqual(value.signal.payload, payload);
    worker.succeed(again, 'approved');
    assert.equal((await client.wait(jobId)).state, 'COMPLETED');
  });

  it('is held by a job that does not wait for it, and counted in its snapshot', async () => {
    const { jobId } = await runningJob();
    const answer = await api.expect<SignalResult>('POST', `/api/jobs/${jobId}/signal`, 200, {
      name: 'later',
    });
    assert.deepEqual(answer, { jobId, name: 'later', resumed: false, signalsHeld: 1 });
    const details = await api.ok<JobDetails>(`/api/jobs/${jobId}`);
    assert.equal(details.job.signalsHeld, 1);
  });

  it('answers 404 for an unknown job, 400 for an ended one and for bad bodies', async () => {
    const missing = await api.call('POST', '/api/jobs/no-such-job/signal', { name: 'approve' });
    assert.equal(missing.status, 404);
    assert.equal((missing.body as ErrorBody).error.code, 'UNKNOWN_JOB');
    const { jobId, worker, assign } = await runningJob();
    worker.succeed(assign, 'done');
    await client.wait(jobId);
    const ended = await api.fails('POST', `/api/jobs/${jobId}/signal`, 400, { name: 'approve' });
    assert.match(ended, /ended/);
    const path = `/api/jobs/${jobId}/signal`;
    assert.match(await api.fails('POST', path, 400, {}), /name is required/);
    assert.match(await api.fails('POST', path, 400, { name: 'a b' }), /name must match/);
    assert.match(await api.fails('POST', path, 400, { name: 'a', extra: 1 }), /unknown field/);
    await api.fails('POST', path, 415, '{"name":"a"}', { 'content-type': 'text/plain' });
    await api.fails('GET', path, 405);
  });

  it('takes a body past 64 KiB and refuses one past its own bound with 413', async () => {
    const { jobId } = await runningJob();
    const path = `/api/jobs/${jobId}/signal`;
    const big = { name: 'big', payload: 'y'.repeat(250 * 1024) };
    await api.expect<SignalResult>('POST', path, 200, big);
    const huge = { name: 'big', payload: 'y'.repeat(400 * 1024) };
    await api.fails('POST', path, 413, huge);
    // Past 256 KiB of JSON but inside the body bound: the coordinator refuses it.
    await api.fails('POST', path, 400, { name: 'big', payload: 'y'.repeat(260 * 1024) });
    // Other endpoints keep their 64 KiB.
    await api.fails('POST', `/api/jobs/${jobId}/cancel`, 413, { pad: 'z'.repeat(70 * 1024) });
  });
});

describe('HTTP API: POST /api/events and GET /api/triggers', { timeout: 60_000 }, () => {
  it('creates its triggers’ jobs, and answers a known event id with the first answer', async () => {
    const set = await client.request({
      type: 'SET_TRIGGER',
      trigger: { name: 'on-paid', event: 'order.paid', taskType: 'PAID_TYPE', queue: 'billing' },
    });
    assert.equal(set.type, 'TRIGGER_INFO', JSON.stringify(set));
    const { triggers } = await api.ok<TriggersResult>('/api/triggers');
    const trigger = triggers.find((t) => t.name === 'on-paid');
    assert.deepEqual(
      [trigger?.event, trigger?.taskType, trigger?.queue],
      ['order.paid', 'PAID_TYPE', 'billing'],
    );
    const body = { name: 'order.paid', payload: { order: 7 }, eventId: 'ev-http-1' };
    const first = await api.expect<PublishResult>('POST', '/api/events', 200, body);
    assert.equal(first.eventId, 'ev-http-1');
    assert.equal(first.jobIds.length, 1);
    assert.deepEqual([first.resumed, first.duplicate], [0, false]);
    const job = await api.ok<JobDetails>(`/api/jobs/${first.jobIds[0]}`);
    assert.deepEqual([job.job.taskType, job.payload], ['PAID_TYPE', { order: 7 }]);
    const again = await api.expect<PublishResult>('POST', '/api/events', 200, body);
    assert.deepEqual(again, { ...first, duplicate: true });
  });

  it('wakes the jobs waiting for the event with that key, and no others', async () => {
    const { jobId, worker, assign } = await runningJob();
    worker.send({
      type: 'TASK_SUSPEND',
      workerId: worker.workerId,
      jobId,
      attemptId: assign.attemptId,
      waitForEvent: { name: 'order.shipped', key: 'o-1' },
    });
    const details = await waiting(jobId);
    assert.deepEqual(details.job.waitingFor, {
      event: 'order.shipped',
      key: 'o-1',
      untilMillis: null,
    });
    const other = { name: 'order.shipped', payload: null, key: 'o-2' };
    assert.equal((await api.expect<PublishResult>('POST', '/api/events', 200, other)).resumed, 0);
    const mine = await api.expect<PublishResult>('POST', '/api/events', 200, {
      name: 'order.shipped',
      payload: { carrier: 'x' },
      key: 'o-1',
    });
    assert.equal(mine.resumed, 1);
    assert.ok(mine.eventId.length > 0);
    const resumed = await worker.assignments.next();
    assert.equal(resumed.steps?.at(-1)?.name, 'dtp.waitForEvent');
  });

  it('refuses bad bodies with 400 naming the field', async () => {
    assert.match(await api.fails('POST', '/api/events', 400, { payload: 1 }), /name is required/);
    assert.match(await api.fails('POST', '/api/events', 400, { name: 'e', key: '' }), /key must/);
    const longId = { name: 'e', eventId: 'i'.repeat(257) };
    assert.match(await api.fails('POST', '/api/events', 400, longId), /eventId must/);
    assert.match(await api.fails('POST', '/api/events', 400, { name: 'e', by: 1 }), /unknown/);
    await api.fails('POST', '/api/triggers', 405);
    await api.fails('DELETE', '/api/events', 405);
  });
});

describe('HTTP API: signals and events with client tokens', { timeout: 60_000 }, () => {
  it('need a token, as every other API request', async () => {
    const { dir, remove } = tempDir();
    const token = 'signal-token-0123456789abcdef';
    const tokenFile = join(dir, 'tokens');
    writeFileSync(tokenFile, `${token}\n`);
    const secured = await startCoordinator({
      metricsPort: 0,
      security: { clientTokenFile: tokenFile },
    });
    try {
      const open = new HttpApi(secured.coordinator.httpPort as number);
      await open.fails('POST', '/api/events', 401, { name: 'order.paid' });
      await open.fails('POST', '/api/jobs/any/signal', 401, { name: 'approve' });
      await open.fails('GET', '/api/triggers', 401);
      const authed = open.with({ authorization: `Bearer ${token}` });
      await authed.expect('POST', '/api/events', 200, { name: 'order.paid' });
      await authed.expect('GET', '/api/triggers', 200);
    } finally {
      await secured.close();
      remove();
    }
  });
});
