/**
 * The typed client library end to end: `connect<typeof tasks>()` typed from
 * a task module by a type-only import, handles, results given back unchanged,
 * typed errors, client-side schema validation, listing as an iterator.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { z } from 'zod';
import {
  InvalidPayloadError,
  JobCancelledError,
  JobFailedError,
  RemoteError,
  WaitTimeoutError,
  connect,
  type DtpClient,
  type FlowJobSpec,
} from '../../src/client/index.js';
import type tasks from '../fixtures/custom-tasks.js';
import {
  startCoordinator,
  startTaskWorker,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';

/**
 * Never called: compiling it is the test. Payload and result types come from
 * the task module's default export; wrong ones do not compile.
 */
export function typeChecks(client: DtpClient<typeof tasks>): void {
  void (async () => {
    const sum = await client.submit('stats.sum', { values: [1, 2] });
    const value = await sum.result();
    const total: number = value.sum + value.n;
    const reversed: string = await (await client.submit('reverse', { text: 'abc' })).result();
    const hash: string = await (await client.submit('SHA256', { text: 'abc' })).result();
    // @ts-expect-error: `values` must be numbers
    await client.submit('stats.sum', { values: ['1'] });
    // @ts-expect-error: reverse needs `text`
    await client.submit('reverse', { txt: 'abc' });
    // @ts-expect-error: no such task in the module
    await client.submit('reverze', { text: 'abc' });
    // @ts-expect-error: the result of reverse is a string
    const wrong: number = await (await client.submit('reverse', { text: 'a' })).result();
    void [total, reversed, hash, wrong];
    // A flow: each job's payload is typed by its own task type.
    await client.submitFlow({
      jobs: [
        { ref: 'a', taskType: 'reverse', payload: { text: 'abc' } },
        { ref: 'b', taskType: 'stats.sum', payload: { values: [1] }, dependsOn: ['a'] },
        { ref: 'c', taskType: 'SHA256', payload: { text: 'x' }, priority: 'HIGH' },
      ],
    });
    const misfit = { ref: 'a', taskType: 'reverse' as const, payload: { values: [1] } };
    // @ts-expect-error: reverse needs `text`, not the payload of stats.sum
    await client.submitFlow({ jobs: [misfit] });
    const unknown = { ref: 'a', taskType: 'reverze' as const, payload: { text: 'abc' } };
    // @ts-expect-error: no such task in the module
    await client.submitFlow({ jobs: [unknown] });
  });
}

/** Never called either: an untyped client takes any task name and JSON object, as before. */
export function untypedChecks(client: DtpClient, jobs: FlowJobSpec[]): void {
  void client.submitFlow({ jobs });
  void client.submitFlow({ jobs: [{ ref: 'a', taskType: 'anything', payload: { any: [1] } }] });
}

describe('typed client', () => {
  let tc: TestCoordinator;
  let client: DtpClient<typeof tasks>;
  const closers: (() => Promise<void>)[] = [];

  before(async () => {
    tc = await startCoordinator();
    const worker = await startTaskWorker(tc.coordinator.workerPort, 'typed-w', { capacity: 2 });
    closers.push(() => worker.close());
    await tc.waitForEvent('worker.registered', (e) => e.workerId === 'typed-w');
    client = await connect<typeof tasks>({
      host: '127.0.0.1',
      port: tc.coordinator.clientPort,
      schemas: { reverse: z.object({ text: z.string().max(10) }) },
    });
  });
  after(async () => {
    await client.close();
    for (const close of closers.splice(0)) await close();
    await tc.close();
  });

  it('gives back the handler value unchanged: objects parsed, strings as they are', async () => {
    const sum = await client.submit('stats.sum', { values: [1, 2, 3] });
    assert.equal(typeof sum.jobId, 'string');
    assert.equal(sum.snapshot.jobId, sum.jobId);
    assert.equal(sum.snapshot.taskType, 'stats.sum');
    assert.equal(sum.servingWorkers, 1);
    assert.deepEqual(await sum.result({ timeoutMs: 10_000 }), { n: 3, sum: 6, attempt: 1 });
    const reversed = await client.submit('reverse', { text: '{"a":1}' });
    assert.equal(await reversed.result(), '}1:"a"{', 'a string result is never parsed');
    const hash = await client.submit('SHA256', { text: 'abc' });
    assert.equal(
      await hash.result(),
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
    assert.deepEqual(await client.result(sum.jobId), { n: 3, sum: 6, attempt: 1 });
  });

  it('rejects with JobFailedError carrying the job error and snapshot', async () => {
    const job = await client.submit('refuse', {}, { maxAttempts: 3 });
    await assert.rejects(job.result(), (err: unknown) => {
      assert.ok(err instanceof JobFailedError);
      assert.equal(err.code, 'JOB_FAILED');
      assert.match(err.jobError ?? '', /cannot ever work/);
      assert.equal(err.job.state, 'FAILED');
      assert.equal(err.job.attempts, 1, 'non-retryable: one attempt');
      return true;
    });
  });

  it('rejects with JobCancelledError, and times out with WaitTimeoutError', async () => {
    const job = await client.submit('polite', { ms: 60_000 });
    await assert.rejects(job.result({ timeoutMs: 50 }), WaitTimeoutError);
    const controller = new AbortController();
    const waiting = job.result({ signal: controller.signal });
    controller.abort(new Error('caller gave up'));
    await assert.rejects(waiting, /caller gave up/);
    assert.equal((await job.cancel()).cancelled, true);
    await assert.rejects(job.result(), (err: unknown) => {
      assert.ok(err instanceof JobCancelledError);
      assert.equal(err.job.state, 'CANCELLED');
      return true;
    });
  });

  it('validates the payload with the schema it was given before sending', async () => {
    const submittedBefore = tc.events.filter((e) => e.type === 'job.submitted').length;
    await assert.rejects(
      client.submit('reverse', { text: 'far too long for it' }),
      (err: unknown) => {
        assert.ok(err instanceof InvalidPayloadError);
        assert.equal(err.code, 'INVALID_PAYLOAD');
        assert.match(err.message, /^Invalid payload: text /);
        assert.equal(err.issues[0]?.field, 'text');
        return true;
      },
    );
    const schema = z.object({ values: z.array(z.number()).min(1) });
    await assert.rejects(
      client.submit('stats.sum', { values: [] }, { schema }),
      /^InvalidPayloadError: Invalid payload: values /,
    );
    const submittedAfter = tc.events.filter((e) => e.type === 'job.submitted').length;
    assert.equal(submittedAfter, submittedBefore, 'nothing was sent');
  });

  it('checks options, and passes the per-attempt deadline on', async () => {
    await assert.rejects(client.submit('SHA256', { text: 'x' }, { timeoutMillis: 0 }), RangeError);
    await assert.rejects(client.submit('SHA256', { text: 'x' }, { maxAttempts: 1001 }), RangeError);
    await assert.rejects(client.submit('SHA256', [] as never), TypeError);
    const job = await client.submit(
      'polite',
      { ms: 60_000 },
      { timeoutMillis: 100, maxAttempts: 1 },
    );
    assert.equal(job.snapshot.timeoutMillis, 100);
    await assert.rejects(job.result({ timeoutMs: 10_000 }), JobFailedError);
  });

  it('submits a typed flow, and checks its payloads against the schemas before sending', async () => {
    const flow = await client.submitFlow({
      jobs: [
        { ref: 'sum', taskType: 'stats.sum', payload: { values: [2, 3] } },
        { ref: 'rev', taskType: 'reverse', payload: { text: 'flow' }, dependsOn: ['sum'] },
      ],
    });
    assert.equal(await client.result(flow.jobs.rev as string), 'wolf');
    const submittedBefore = tc.events.filter((e) => e.type === 'job.submitted').length;
    await assert.rejects(
      client.submitFlow({
        jobs: [
          { ref: 'ok', taskType: 'SHA256', payload: { text: 'x' } },
          { ref: 'long', taskType: 'reverse', payload: { text: 'far too long for it' } },
        ],
      }),
      (err: unknown) => {
        assert.ok(err instanceof InvalidPayloadError);
        assert.match(err.message, /^Invalid payload: text .*\(flow job ref "long"\)$/);
        return true;
      },
    );
    const submittedAfter = tc.events.filter((e) => e.type === 'job.submitted').length;
    assert.equal(submittedAfter, submittedBefore, 'nothing was sent');
    // A task named like a property every object has has no schema.
    const odd = await client.submitFlow({
      jobs: [{ ref: 'odd', taskType: 'constructor' as never, payload: {} as never }],
    });
    assert.equal(typeof odd.jobs.odd, 'string');
    await client.cancel(odd.jobs.odd as string);
  });

  it('reports the coordinator refusing a task type name', async () => {
    await assert.rejects(
      client.submit({ taskType: 'bad name!', payload: {} }),
      (err: unknown) => err instanceof RemoteError && /Invalid task type/.test(err.message),
    );
  });

  it('iterates over every job of a state, page after page', async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 7; i++) {
      const job = await client.submit(
        'WORD_COUNT',
        { text: `w ${i}` },
        { idempotencyKey: `it-${i}` },
      );
      await job.result();
      ids.add(job.jobId);
    }
    const seen: string[] = [];
    for await (const job of client.list({ state: 'COMPLETED', limit: 3 })) seen.push(job.jobId);
    for (const id of ids) assert.ok(seen.includes(id), `${id} listed`);
    assert.equal(new Set(seen).size, seen.length, 'no job twice');
  });

  it('loads no task code for a type-only import', () => {
    const compiled = readFileSync(new URL(import.meta.url), 'utf8');
    assert.doesNotMatch(compiled, /from '\.\.\/fixtures\/custom-tasks\.js'/);
  });
});
