/**
 * Deduplication and expiry options through the client CLI against a real
 * coordinator: `submit --json`'s shape, and the same fields taken by
 * `submit-many` lines and `submit-flow` jobs. The keys are distinct, so
 * every submission creates its job (`deduplicated: false`) whether or not
 * the coordinator deduplicates.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runCliOn, type CliRun } from '../helpers/cli-runner.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';
import type { JobSnapshot } from '../../src/protocol/messages.js';

describe('client CLI: deduplication and expiry options', () => {
  let tc: TestCoordinator;
  let input = '';
  before(async () => {
    tc = await startCoordinator();
  });
  after(async () => {
    await tc.close();
  });

  const cli = (...argv: string[]): Promise<CliRun> =>
    runCliOn(tc.coordinator.clientPort, argv, () => Promise.resolve(input));

  it('prints {jobId, job, deduplicated, replaced} for submit --json', async () => {
    const out = await cli(
      'submit',
      'sha256',
      '--text',
      'a',
      '--dedup-key',
      'cli-dedup/1',
      '--dedup-mode',
      'throttle',
      '--dedup-window',
      '1m',
      '--expire-after',
      '1h',
      '--json',
    );
    assert.equal(out.code, 0, out.stdout + out.stderr);
    const doc = JSON.parse(out.stdout) as Record<string, unknown>;
    assert.deepEqual(Object.keys(doc).slice(0, 4), ['jobId', 'job', 'deduplicated', 'replaced']);
    assert.deepEqual([doc.deduplicated, doc.replaced], [false, false]);
    assert.equal((doc.job as JobSnapshot).jobId, doc.jobId);
    const human = await cli('submit', 'sha256', '--text', 'b', '--dedup-key', 'cli-dedup/2');
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^Job submitted\n/);
    assert.doesNotMatch(human.stdout, /Deduplicated/);
  });

  it('refuses a bad flag with exit 2 and sends nothing', async () => {
    const before = tc.coordinator.inspect().activeCount;
    const out = await cli('submit', 'sha256', '--text', 'a', '--dedup-mode', 'throttle');
    assert.equal(out.code, 2);
    assert.match(out.stderr, /--dedup-mode needs --dedup-key/);
    assert.equal(tc.coordinator.inspect().activeCount, before);
  });

  it('takes the same fields on submit-many lines and submit-flow jobs', async () => {
    const expiresAtMillis = Date.now() + 3_600_000;
    input = [
      { taskType: 'SHA256', payload: { text: 'a' }, dedupKey: 'cli-many/1', expiresAtMillis },
      {
        taskType: 'SHA256',
        payload: { text: 'b' },
        dedupKey: 'cli-many/2',
        dedupMode: 'debounce',
        runAtMillis: Date.now() + 60_000,
      },
    ]
      .map((line) => JSON.stringify(line))
      .join('\n');
    const many = await cli('submit-many', '--file', '-', '--json');
    assert.equal(many.code, 0, many.stdout + many.stderr);
    assert.equal((JSON.parse(many.stdout) as { jobIds: string[] }).jobIds.length, 2);
    input = JSON.stringify({
      jobs: [
        {
          ref: 'a',
          taskType: 'SHA256',
          payload: { text: 'a' },
          dedupKey: 'cli-flow/a',
          expiresAtMillis,
        },
        {
          ref: 'b',
          taskType: 'SHA256',
          payload: { text: 'b' },
          dependsOn: ['a'],
          dedupKey: 'cli-flow/b',
          dedupMode: 'throttle',
          dedupWindowMillis: 60_000,
        },
      ],
    });
    const flow = await cli('submit-flow', '-', '--json');
    assert.equal(flow.code, 0, flow.stdout + flow.stderr);
    assert.deepEqual(Object.keys((JSON.parse(flow.stdout) as { jobs: object }).jobs), ['a', 'b']);
    input = JSON.stringify({
      jobs: [{ ref: 'a', taskType: 'SHA256', payload: {}, dedupKey: 'k', dedupMode: 'throttle' }],
    });
    const bad = await cli('submit-flow', '-');
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /jobs\[0\] \(ref "a"\): dedupMode throttle needs dedupWindowMillis/);
  });
});
