/**
 * Durable steps end to end, in-process: a real coordinator, real workers
 * that load the steps fixture (test/fixtures/step-tasks.ts), and the client.
 * A retried attempt replays recorded steps instead of running them; a sleep
 * frees its slot and resumes; a wait resumes with the other job's outcome;
 * a replay that calls another step fails the job for good; values JSON
 * cannot carry and names used twice are refused in the handler; the bounds
 * hold; a stale attempt cannot record.
 */
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, afterEach, before, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import { MAX_STEPS_PER_JOB } from '../../src/protocol/limits.js';
import type { JobSnapshot, JsonObject } from '../../src/protocol/messages.js';
import { runsOf } from '../fixtures/step-tasks.js';
import { runCliOn } from '../helpers/cli-runner.js';
import { ScriptedWorker } from '../helpers/raw-peers.js';
import {
  startCoordinator,
  startTaskWorker,
  tempDir,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const STEP_TASKS = fileURLToPath(new URL('../fixtures/step-tasks.js', import.meta.url));

describe('durable steps, end to end', { timeout: 120_000 }, () => {
  let tc: TestCoordinator;
  let client: DtpClient;
  const workers: { close(): Promise<void> }[] = [];
  const dirs: { remove(): void }[] = [];

  before(async () => {
    tc = await startCoordinator();
    client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.close()));
    await until(() => tc.coordinator.inspect().workers.length === 0, { what: 'workers gone' });
    for (const dir of dirs.splice(0)) dir.remove();
  });
  after(async () => {
    await client.close();
    await tc.close();
  });

  async function worker(id: string, capacity = 1): Promise<void> {
    workers.push(
      await startTaskWorker(tc.coordinator.workerPort, id, { capacity, tasks: [STEP_TASKS] }),
    );
    await tc.waitForEvent('worker.registered', (e) => e.workerId === id);
  }

  function scratch(): string {
    const made = tempDir('dtp-steps-');
    dirs.push(made);
    return made.dir;
  }

  async function run(taskType: string, payload: JsonObject, maxAttempts = 3): Promise<JobSnapshot> {
    const { jobId } = await client.submit({ taskType, payload, maxAttempts });
    return client.wait(jobId, 20_000);
  }

  function resultOf(job: JobSnapshot): Record<string, unknown> {
    assert.equal(job.state, 'COMPLETED', `job ${job.jobId}: ${job.error}`);
    return JSON.parse(job.result ?? 'null') as Record<string, unknown>;
  }

  it('a retried attempt runs only the steps not recorded yet', async () => {
    await worker('w-steps');
    const dir = scratch();
    const job = await run('steps.three', { dir, failOnce: true });
    assert.deepEqual(resultOf(job), { a: 1, b: { from: 1, n: 1 }, c: 1, attempt: 2 });
    assert.deepEqual(
      ['a', 'b', 'c'].map((name) => runsOf(dir, name)),
      [1, 1, 1],
      'each step body ran once over both attempts',
    );
    assert.deepEqual(
      job.steps?.map((s) => s.name),
      ['a', 'b', 'c'],
    );
    const status = await client.status(job.jobId);
    assert.deepEqual(status.steps, job.steps, 'a finished job lists its steps from the store');
  });

  it('a replay fetches the recorded steps its assignment could not carry', async () => {
    await worker('w-big');
    const dir = scratch();
    const job = await run('steps.big', { dir });
    const size = 200 * 1024;
    assert.deepEqual(resultOf(job), { sizes: [size, size, size], attempt: 2 });
    assert.deepEqual(
      ['big-0', 'big-1', 'big-2'].map((name) => runsOf(dir, name)),
      [1, 1, 1],
    );
  });

  it('a sleep frees the slot for another job and resumes after its time', async () => {
    await worker('w-one-slot', 1);
    const dir = scratch();
    const sleeper = await client.submit({
      taskType: 'steps.sleepy',
      // Long enough that the other job ends within it on a loaded machine.
      payload: { dir, ms: 4_000 },
      maxAttempts: 1,
    });
    await until(async () => (await client.status(sleeper.jobId)).state === 'SCHEDULED', {
      what: 'the sleeper asleep',
    });
    // What `status` shows of it: when it runs again; its first attempt, which
    // ended in the sleep, does not count toward its one attempt.
    const asleep = await runCliOn(tc.coordinator.clientPort, ['status', sleeper.jobId]);
    assert.equal(asleep.code, 0, asleep.stderr);
    assert.match(
      asleep.stdout,
      /\n {2}Attempt: {2}0\/1\n {2}Suspends: 1 \(ctx\.sleep, ctx\.waitFor/,
    );
    assert.match(asleep.stdout, /\n {2}Run at: {3}\d{4}-\d\d-\d\dT[\d:.]+Z\n/);
    const other = await run('steps.three', { dir: scratch() });
    assert.equal(other.state, 'COMPLETED');
    assert.equal((await client.status(sleeper.jobId)).state, 'SCHEDULED', 'still asleep');
    const done = await client.wait(sleeper.jobId, 20_000);
    assert.deepEqual(resultOf(done), { before: 1, after: 1, attempt: 2 });
    assert.deepEqual([done.attempts, done.suspensions], [2, 1]);
    const shown = await runCliOn(tc.coordinator.clientPort, ['status', sleeper.jobId]);
    assert.match(shown.stdout, /\n {2}Attempt: {2}1\/1\n {2}Suspends: 1 /);
    assert.ok((other.finishedAtMillis ?? 0) < (done.startedAtMillis ?? 0));
    assert.equal(runsOf(dir, 'before'), 1);
    assert.deepEqual(
      done.steps?.map((s) => s.name),
      ['before', 'dtp.sleep', 'after'],
    );
    const { attempts } = await client.status(done.jobId, { attempts: true });
    assert.deepEqual(
      attempts?.map((a) => a.outcome),
      ['SUSPENDED', 'SUCCEEDED'],
      'the sleep did not use up the one attempt',
    );
  });

  it('a wait resumes when the other job ends, with its outcome', async () => {
    await worker('w-wait', 2);
    const dir = scratch();
    const target = await client.submit({
      taskType: 'steps.sleepy',
      payload: { dir: scratch(), ms: 300 },
    });
    const waiter = await client.submit({
      taskType: 'steps.waiter',
      payload: { dir, jobId: target.jobId },
    });
    const done = await client.wait(waiter.jobId, 20_000);
    const result = resultOf(done);
    const targetDone = await client.status(target.jobId);
    assert.equal(targetDone.state, 'COMPLETED');
    assert.deepEqual(result.outcome, {
      jobId: target.jobId,
      state: 'COMPLETED',
      result: JSON.parse(targetDone.result ?? 'null'),
      error: null,
      omitted: false,
    });
    assert.equal(runsOf(dir, 'before'), 1);
  });

  it('a handler waits for the child it made (ctx.enqueue in a step) and gets its result', async () => {
    await worker('w-parent', 1);
    const dir = scratch();
    const done = await run('steps.parent', { dir });
    const result = resultOf(done);
    const childId = String(result.childId);
    const child = await client.status(childId);
    assert.equal(child.state, 'COMPLETED');
    assert.equal(child.parentJobId, done.jobId);
    assert.deepEqual(result.outcome, {
      jobId: childId,
      state: 'COMPLETED',
      result: { a: 1, b: { from: 1, n: 1 }, c: 1, attempt: 1 },
      error: null,
      omitted: false,
    });
    assert.equal(result.attempt, 2, 'the wait resumed in a second attempt');
    assert.equal(runsOf(dir, 'after-wait'), 1);
    assert.deepEqual(
      done.steps?.map((s) => s.name),
      ['spawn', 'dtp.waitFor'],
    );
    const parent = await client.status(done.jobId);
    assert.deepEqual(parent.children, [childId]);
  });

  it('fails the job for good when a replay calls another step (NON_DETERMINISTIC)', async () => {
    await worker('w-drift');
    const dir = scratch();
    const job = await run('steps.drift', { dir }, 5);
    assert.equal(job.state, 'FAILED');
    assert.match(job.error ?? '', /^NON_DETERMINISTIC: step 0 was recorded as "first-name"/);
    assert.equal(job.attempts, 2, 'not retried after the mismatch');
    assert.equal(runsOf(dir, 'second-name'), 0);
  });

  it('refuses values JSON cannot carry, reused and reserved names, in the handler, recording nothing', async () => {
    await worker('w-bad');
    for (const kind of ['undefined', 'function', 'cycle', 'bigint', 'nan', 'date', 'reserved']) {
      const job = await run('steps.bad', { kind });
      const outcome = resultOf(job);
      assert.equal(outcome.code, 'INVALID_STEP', `${kind}: ${String(outcome.message)}`);
      assert.equal(job.steps, undefined, `${kind}: nothing recorded`);
    }
    const reused = await run('steps.bad', { kind: 'reused' });
    assert.equal(resultOf(reused).code, 'INVALID_STEP');
    assert.match(String(resultOf(reused).message), /used twice/);
    assert.deepEqual(
      reused.steps?.map((s) => s.name),
      ['once'],
    );
  });

  it('answers a step of a stale attempt with STALE_ATTEMPT and records nothing (the wire)', async () => {
    const raw = await ScriptedWorker.register(tc.coordinator.workerPort, 'w-raw', 1, {
      taskTypes: ['raw.steps'],
    });
    workers.push(raw);
    const { jobId } = await client.submit({ taskType: 'raw.steps', payload: {}, maxAttempts: 3 });
    const first = await raw.assignments.next();
    raw.fail(first, 'try again');
    const second = await raw.assignments.next();
    assert.notEqual(second.attemptId, first.attemptId);
    const stepOf = (attemptId: string, requestId: number) =>
      ({
        type: 'RECORD_STEP',
        workerId: 'w-raw',
        jobId,
        attemptId,
        requestId,
        index: 0,
        name: 'late',
        result: '1',
      }) as const;
    raw.send(stepOf(first.attemptId, 1));
    const refused = await raw.others.next();
    assert.deepEqual(refused.type === 'ERROR' && [refused.code, refused.requestId], [
      'STALE_ATTEMPT',
      1,
    ]);
    raw.send(stepOf(second.attemptId, 2));
    const recorded = await raw.others.next();
    assert.deepEqual(recorded, { type: 'STEP_RECORDED', requestId: 2, jobId, index: 0 });
    raw.succeed(second, 'done');
    const done = await client.wait(jobId, 10_000);
    assert.deepEqual(
      done.steps?.map((s) => s.name),
      ['late'],
      'only the current attempt recorded',
    );
  });

  it('bounds the steps of one job in count and in bytes', async () => {
    await worker('w-many');
    const many = resultOf(await run('steps.many', { n: MAX_STEPS_PER_JOB + 1 }));
    assert.deepEqual([many.recorded, many.code], [MAX_STEPS_PER_JOB, 'LIMIT_EXCEEDED']);
    const big = resultOf(await run('steps.many', { n: 3, bytes: 400 * 1024 }));
    assert.deepEqual([big.recorded, big.code], [2, 'LIMIT_EXCEEDED']);
  });
});

describe('durable steps across a coordinator restart (SQLite)', { timeout: 120_000 }, () => {
  it('a sleeping job and a waiting job keep their steps and go on after the restart', async () => {
    const temp = tempDir('dtp-steps-restart-');
    const databasePath = `${temp.dir}/coordinator.db`;
    const dir = join(temp.dir, 'sleeper');
    const waiterDir = join(temp.dir, 'waiter');
    mkdirSync(dir);
    mkdirSync(waiterDir);
    let tc = await startCoordinator({ databasePath });
    let client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
    let worker = await startTaskWorker(tc.coordinator.workerPort, 'w-before', {
      capacity: 2,
      tasks: [STEP_TASKS],
    });
    try {
      const sleeper = await client.submit({
        taskType: 'steps.sleepy',
        payload: { dir, ms: 1_500 },
        maxAttempts: 1,
      });
      const target = await client.submit({
        taskType: 'SLEEP',
        payload: { durationMillis: 10 },
        runAtMillis: Date.now() + 1_500,
      });
      const waiter = await client.submit({
        taskType: 'steps.waiter',
        payload: { dir: waiterDir, jobId: target.jobId },
      });
      await until(
        async () =>
          (await client.status(sleeper.jobId)).state === 'SCHEDULED' &&
          (await client.status(waiter.jobId)).state === 'WAITING',
        { what: 'one job asleep, one waiting' },
      );
      await worker.close();
      await client.close();
      await tc.close();
      tc = await startCoordinator({ databasePath });
      client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
      assert.equal((await client.status(sleeper.jobId)).state, 'SCHEDULED');
      assert.equal((await client.status(waiter.jobId)).state, 'WAITING');
      worker = await startTaskWorker(tc.coordinator.workerPort, 'w-after', {
        capacity: 2,
        tasks: [STEP_TASKS],
      });
      const slept = await client.wait(sleeper.jobId, 20_000);
      assert.equal(slept.state, 'COMPLETED', slept.error ?? '');
      assert.deepEqual(JSON.parse(slept.result ?? 'null'), { before: 1, after: 1, attempt: 2 });
      const waited = await client.wait(waiter.jobId, 20_000);
      assert.equal(waited.state, 'COMPLETED', waited.error ?? '');
      const outcome = (JSON.parse(waited.result ?? 'null') as { outcome: { state: string } })
        .outcome;
      assert.equal(outcome.state, 'COMPLETED');
      assert.deepEqual(
        [runsOf(dir, 'before'), runsOf(waiterDir, 'before')],
        [1, 1],
        'each handler ran its first step once',
      );
      const { attempts } = await client.status(sleeper.jobId, { attempts: true });
      assert.deepEqual(
        attempts?.map((a) => a.outcome),
        ['SUSPENDED', 'SUCCEEDED'],
      );
    } finally {
      await worker.close();
      await client.close();
      await tc.close();
      temp.remove();
    }
  });
});
