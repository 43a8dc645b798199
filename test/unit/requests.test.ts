/**
 * The one mapping of a job's options to wire fields (src/client/requests.ts):
 * which fields each submission message carries, and the options refused
 * before anything is sent.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  flowMessage,
  jobFieldsOf,
  requestFieldsOf,
  submitJobsMessage,
  submitMessage,
} from '../../src/client/requests.js';
import { decodeMessage, encodeMessage } from '../../src/protocol/codec.js';
import type { Message } from '../../src/protocol/messages.js';

const NOW_MS = 1_800_000_000_000;
const V1_KEYS = ['type', 'taskType', 'payload', 'maxAttempts', 'idempotencyKey', 'priority'];
const DEDUP = {
  dedupKey: 'report:7',
  dedupMode: 'throttle',
  dedupWindowMillis: 60_000,
  expiresAtMillis: NOW_MS + 3_600_000,
} as const;

/** The keys of a message as they go on the wire (nulls of extension fields left out). */
function wireKeys(msg: Message): string[] {
  return Object.keys(JSON.parse(wireText(msg)) as object).sort();
}

/** The JSON text of a message's frame (after its 4-byte length). */
function wireText(msg: Message): string {
  return encodeMessage(msg).subarray(4).toString('utf8');
}

describe('submission mapping', () => {
  it('sends a plain SUBMIT_JOB as a v1 request: no extension field on the wire', () => {
    const msg = submitMessage({ taskType: 'SHA256', payload: { text: 'a' } });
    assert.deepEqual(wireKeys(msg), [...V1_KEYS, 'knownStates'].sort());
    for (const key of ['dedupKey', 'dedupMode', 'dedupWindowMillis', 'expiresAtMillis']) {
      assert.equal(key in msg, false, key);
    }
  });

  it('carries deduplication and expiry in SUBMIT_JOB, SUBMIT_JOBS and SUBMIT_FLOW alike', () => {
    const fields = jobFieldsOf('SHA256', { text: 'a' }, { ...DEDUP, queue: 'reports' }, NOW_MS);
    const single = submitMessage(fields);
    assert.deepEqual(
      [single.dedupKey, single.dedupMode, single.dedupWindowMillis, single.expiresAtMillis],
      Object.values(DEDUP),
    );
    assert.equal(single.queue, 'reports');
    const batch = submitJobsMessage([fields, { taskType: 'SHA256', payload: {} }]);
    assert.deepEqual(
      { ...batch.jobs[0], payload: undefined },
      {
        taskType: 'SHA256',
        payload: undefined,
        maxAttempts: null,
        idempotencyKey: null,
        priority: null,
        queue: 'reports',
        ...DEDUP,
      },
    );
    assert.deepEqual(Object.keys(batch.jobs[1] ?? {}).sort(), [
      'idempotencyKey',
      'maxAttempts',
      'payload',
      'priority',
      'taskType',
    ]);
    const flow = flowMessage({
      jobs: [
        { ref: 'a', taskType: 'SHA256', payload: {}, ...DEDUP },
        { ref: 'b', taskType: 'SHA256', payload: {}, dependsOn: ['a'] },
      ],
    });
    const [a, b] = flow.jobs;
    assert.deepEqual(
      [a?.dedupKey, a?.dedupMode, a?.dedupWindowMillis, a?.expiresAtMillis],
      Object.values(DEDUP),
    );
    assert.equal(b !== undefined && 'dedupKey' in b, false);
    assert.deepEqual(b?.dependsOn, ['a']);
    // Each message decodes as the coordinator reads it, the fields intact.
    const decoded = decodeMessage(encodeMessage(flow).subarray(4));
    assert.equal(decoded.type === 'SUBMIT_FLOW' && decoded.jobs[0]?.dedupWindowMillis, 60_000);
  });

  it('maps the options form and the field-by-field form to the same fields', () => {
    const options = jobFieldsOf(
      'SHA256',
      { text: 'a' },
      { dedupKey: 'k', dedupMode: 'debounce', delayMs: 5_000, expiresAtMillis: NOW_MS + 9_000 },
      NOW_MS,
    );
    const spelled = requestFieldsOf(
      {
        taskType: 'SHA256',
        payload: { text: 'a' },
        dedupKey: 'k',
        dedupMode: 'debounce',
        runAtMillis: NOW_MS + 5_000,
        expiresAtMillis: NOW_MS + 9_000,
      },
      NOW_MS,
    );
    assert.deepEqual(options, spelled);
    assert.equal(options.dedupWindowMillis, null);
  });

  it('refuses deduplication and expiry options that cannot work, before anything is sent', () => {
    const refused: [Record<string, unknown>, RegExp][] = [
      [{ dedupKey: '' }, /dedupKey must be 1\.\.256 characters, got 0/],
      [{ dedupKey: 'k'.repeat(257) }, /dedupKey must be 1\.\.256/],
      [{ dedupMode: 'active' }, /dedupMode needs a dedupKey/],
      [
        { dedupKey: 'k', dedupMode: 'often' },
        /dedupMode must be one of active, throttle, debounce/,
      ],
      [{ dedupKey: 'k', dedupMode: 'throttle' }, /throttle needs dedupWindowMillis/],
      [{ dedupKey: 'k', dedupWindowMillis: 10 }, /only with dedupMode throttle/],
      [{ dedupKey: 'k', dedupMode: 'throttle', dedupWindowMillis: 0.5 }, /1\.\.31622400000/],
      [{ dedupKey: 'k', dedupMode: 'debounce' }, /debounce needs a delay/],
      [{ expiresAtMillis: NOW_MS }, /expiresAtMillis is in the past/],
      [{ expiresAtMillis: -5 }, /expiresAtMillis is not a valid time/],
    ];
    for (const [options, message] of refused) {
      assert.throws(
        () => jobFieldsOf('SHA256', {}, options, NOW_MS),
        message,
        JSON.stringify(options),
      );
    }
    assert.throws(
      () =>
        flowMessage({ jobs: [{ ref: 'x', taskType: 'SHA256', payload: {}, dedupMode: 'active' }] }),
      /jobs\[0\] \(ref "x"\): dedupMode needs a dedupKey/,
    );
  });
});
