/**
 * `submit-many` without a coordinator: which lines it reads (`--from-line`),
 * and what a run of batches reports when one is refused, resent after a
 * retryable rejection, or lost with the connection.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { BatchJob, BatchSubmission } from '../../src/client/client.js';
import { SubmitRejectedError, TransportError } from '../../src/client/errors.js';
import {
  describeStop,
  parseJobLine,
  parseJobLines,
  stopFields,
  submitInBatches,
  type JobLine,
} from '../../src/cli/submit-many.js';
import { LocalErrorCode } from '../../src/protocol/error-codes.js';

const line = (n: number): string => JSON.stringify({ taskType: 'SHA256', payload: { n } });

function jobs(count: number): JobLine[] {
  return parseJobLines(Array.from({ length: count }, (_, i) => line(i + 1)).join('\n'));
}

const rejection = (): SubmitRejectedError =>
  new SubmitRejectedError({
    reason: 'too many active jobs',
    activeCount: 10,
    limit: 10,
    retryable: true,
  });

/** A client whose n-th submitMany call (0-based) fails with `failures[n]`, if set. */
function fakeClient(failures: Record<number, Error> = {}) {
  const calls: BatchJob[][] = [];
  return {
    calls,
    submitBatch(batch: readonly BatchJob[]): Promise<BatchSubmission> {
      const call = calls.push([...batch]) - 1;
      const failure = failures[call];
      if (failure !== undefined) return Promise.reject(failure);
      // A job with a deduplication key stands for an existing job, as a coordinator would say.
      const deduplicated = batch.map((job) => job.dedupKey !== undefined);
      return Promise.resolve({
        jobIds: batch.map((_, i) => `id-${call}-${i}`),
        deduplicated,
        replaced: batch.map(() => false),
      });
    },
  };
}

describe('parseJobLines', () => {
  it('starts at --from-line, keeping the file numbers of the lines', () => {
    const text = [line(1), '', line(3), line(4)].join('\n');
    assert.deepEqual(
      parseJobLines(text, 3).map((entry) => entry.line),
      [3, 4],
    );
    // A bad line before the starting line is not read again.
    assert.equal(parseJobLines(`not json\n${line(2)}`, 2).length, 1);
    assert.throws(() => parseJobLines(text, 9), /--from-line 9: the file has only 4 lines/);
    assert.throws(() => parseJobLines(`${text}\n\n`, 6), /no jobs from line 6 on/);
  });
});

describe('parseJobLine', () => {
  const nowMs = 1_800_000_000_000;
  const parse = (fields: Record<string, unknown>): BatchJob =>
    parseJobLine(JSON.stringify({ taskType: 'SHA256', payload: {}, ...fields }), 4, nowMs);

  it('takes the fields of a flow job but ref and dependsOn, deduplication and expiry too', () => {
    const job = parse({
      queue: 'reports',
      groupKey: 'tenant-7',
      runAtMillis: nowMs + 60_000,
      timeoutMillis: 5_000,
      maxAttempts: 2,
      priority: 'LOW',
      idempotencyKey: 'k',
      dedupKey: 'report:7',
      dedupMode: 'debounce',
      expiresAtMillis: nowMs + 120_000,
    });
    assert.deepEqual(job, {
      taskType: 'SHA256',
      payload: {},
      maxAttempts: 2,
      priority: 'LOW',
      idempotencyKey: 'k',
      timeoutMillis: 5_000,
      queue: 'reports',
      groupKey: 'tenant-7',
      runAt: nowMs + 60_000,
      dedupKey: 'report:7',
      dedupMode: 'debounce',
      expiresAtMillis: nowMs + 120_000,
    });
    const throttled = parse({ dedupKey: 'k', dedupMode: 'throttle', dedupWindowMillis: 1_000 });
    assert.deepEqual([throttled.dedupMode, throttled.dedupWindowMillis], ['throttle', 1_000]);
  });

  it('refuses deduplication and expiry fields that do not go together, naming the line', () => {
    const refused: [Record<string, unknown>, RegExp][] = [
      [{ dedupKey: '' }, /line 4: dedupKey must be 1\.\.256 characters/],
      [{ dedupKey: 'x'.repeat(257) }, /dedupKey must be 1\.\.256 characters, got 257/],
      [{ dedupKey: 7 }, /dedupKey must be a string/],
      [{ dedupKey: 'k', dedupMode: 'sometimes' }, /dedupMode must be one of active, throttle/],
      [{ dedupMode: 'active' }, /dedupMode needs a dedupKey/],
      [{ dedupKey: 'k', dedupMode: 'throttle' }, /throttle needs dedupWindowMillis/],
      [{ dedupKey: 'k', dedupWindowMillis: 5 }, /dedupWindowMillis goes only with .*throttle/],
      [{ dedupKey: 'k', dedupMode: 'throttle', dedupWindowMillis: 0 }, /1\.\.31622400000/],
      [{ dedupKey: 'k', dedupMode: 'debounce' }, /debounce needs a delay/],
      [{ expiresAtMillis: nowMs - 1 }, /expiresAtMillis is in the past/],
      [{ expiresAtMillis: 'soon' }, /expiresAtMillis \(epoch ms\) must be an integer/],
      [{ ref: 'a' }, /"ref" is for jobs with parents/],
    ];
    for (const [fields, message] of refused) {
      assert.throws(() => parse(fields), message, JSON.stringify(fields));
    }
  });
});

describe('submitInBatches', () => {
  it('gives the lines whose deduplication key named an existing job', async () => {
    const text = [line(1), JSON.stringify({ taskType: 'SHA256', payload: {}, dedupKey: 'k' })];
    const outcome = await submitInBatches(fakeClient(), parseJobLines(text.join('\n\n')));
    assert.deepEqual(outcome.deduplicatedLines, [3]);
  });

  it('stops at a refused batch and says what was created and what is left', async () => {
    const client = fakeClient({ 1: rejection() });
    const outcome = await submitInBatches(client, jobs(2_500));
    assert.equal(client.calls.length, 2);
    assert.equal(outcome.jobIds.length, 1_000);
    assert.equal(outcome.lastCreatedLine, 1_000);
    const stopped = outcome.stopped;
    assert.ok(stopped !== null);
    assert.deepEqual(stopped.batch, { fromLine: 1_001, toLine: 2_000 });
    assert.deepEqual(stopFields(stopped), {
      remaining: { fromLine: 1_001, toLine: 2_500, jobs: 1_500 },
      resumeFromLine: 1_001,
    });
    const text = describeStop(outcome, stopped);
    assert.match(text, /Created 1000 jobs \(up to line 1000; their ids are on stdout\)/);
    assert.match(text, /Not created: lines 1001\.\.2500 \(1500 jobs\)/);
    assert.match(text, /--from-line 1001 once the coordinator has room/);
  });

  it('resends a batch that admission control refused, as --submit-retries allows', async () => {
    const client = fakeClient({ 0: rejection(), 1: rejection() });
    const retries: string[] = [];
    const outcome = await submitInBatches(client, jobs(3), {
      retries: 2,
      baseDelayMs: 0,
      onRetry: (event, batch) => retries.push(`${batch.fromLine}..${batch.toLine} #${event.retry}`),
    });
    assert.equal(outcome.stopped, null);
    assert.deepEqual(outcome.jobIds, ['id-2-0', 'id-2-1', 'id-2-2']);
    assert.deepEqual(retries, ['1..3 #1', '1..3 #2']);
  });

  it('marks a batch lost with the connection as perhaps created, and does not resend it', async () => {
    const lost = new TransportError(LocalErrorCode.ConnectionLost, 'connection lost');
    const client = fakeClient({ 0: lost });
    const outcome = await submitInBatches(client, jobs(4), { retries: 3, baseDelayMs: 0 });
    assert.equal(client.calls.length, 1);
    const stopped = outcome.stopped;
    assert.ok(stopped !== null);
    assert.equal(stopped.uncertain, true);
    assert.deepEqual(stopFields(stopped).uncertainLines, { fromLine: 1, toLine: 4 });
    assert.match(describeStop(outcome, stopped), /may have been created/);
  });
});
