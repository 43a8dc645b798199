/**
 * `client.sh submit --depends-on` and `client.sh submit-flow` against a real
 * coordinator: the output the contract fixes, and bad input refused with
 * exit 2 before anything is sent (or exit 1 with the coordinator's error),
 * nothing created either way.
 */
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runCliOn, type CliRun } from '../helpers/cli-runner.js';
import type { JobSnapshot } from '../../src/protocol/messages.js';
import { startCoordinator, tempDir, type TestCoordinator } from '../helpers/test-coordinator.js';

let tc: TestCoordinator;
const dir = tempDir();
let stdinText = '';

async function cli(...argv: string[]): Promise<CliRun> {
  return runCliOn(tc.coordinator.clientPort, argv, (path) =>
    path === '-' ? Promise.resolve(stdinText) : readFile(path, 'utf8'),
  );
}

async function flowFile(name: string, doc: unknown): Promise<string> {
  const path = join(dir.dir, name);
  await writeFile(path, typeof doc === 'string' ? doc : JSON.stringify(doc));
  return path;
}

async function jobCount(): Promise<number> {
  const listed = await cli('list', '--json');
  return (JSON.parse(listed.stdout) as { jobs: JobSnapshot[] }).jobs.length;
}

describe('client CLI: dependencies and flows', () => {
  before(async () => {
    tc = await startCoordinator();
  });
  after(async () => {
    await tc.close();
    dir.remove();
  });

  it('prints {"jobs": {ref: id}} for a flow read from a file or standard input', async () => {
    const path = await flowFile('ok.json', {
      jobs: [
        { ref: 'b', taskType: 'SHA256', payload: { text: 'b' }, dependsOn: ['a'] },
        { ref: 'a', taskType: 'SHA256', payload: { text: 'a' } },
      ],
    });
    const out = await cli('submit-flow', path, '--json');
    assert.equal(out.code, 0, out.stderr);
    const { jobs } = JSON.parse(out.stdout) as { jobs: Record<string, string> };
    assert.deepEqual(Object.keys(jobs).sort(), ['a', 'b']);
    const b = JSON.parse((await cli('status', jobs.b as string, '--json')).stdout) as JobSnapshot;
    assert.deepEqual([b.state, b.dependsOn], ['WAITING', [jobs.a]]);
    // For people: the parents it waits for, with their states.
    const shown = await cli('status', jobs.b as string);
    assert.match(shown.stdout, new RegExp(`\\n {2}Depends: {2}${jobs.a} \\(QUEUED\\)\\n`));
    stdinText = JSON.stringify({
      jobs: [{ ref: 'solo', taskType: 'SHA256', payload: { text: 's' } }],
    });
    const piped = await cli('submit-flow', '-');
    assert.equal(piped.code, 0, piped.stderr);
    assert.match(piped.stdout, /^solo\t\S+\n$/);
  });

  const refused: [string, unknown, RegExp][] = [
    [
      'a duplicate ref',
      {
        jobs: [
          { ref: 'a', taskType: 'SHA256', payload: {} },
          { ref: 'a', taskType: 'SHA256', payload: {} },
        ],
      },
      /used twice/,
    ],
    ['an empty list', { jobs: [] }, /no jobs/],
    ['no JSON', '{"jobs": [', /is not JSON/],
    [
      'a payload that is not an object',
      { jobs: [{ ref: 'a', taskType: 'SHA256', payload: 3 }] },
      /payload must be a JSON object/,
    ],
  ];
  for (const [what, doc, message] of refused) {
    it(`exits 2 for ${what} and creates nothing`, async () => {
      const before = await jobCount();
      const out = await cli('submit-flow', await flowFile('bad.json', doc));
      assert.equal(out.code, 2, out.stderr);
      assert.match(out.stderr, message);
      assert.equal(await jobCount(), before);
    });
  }

  it("shows the coordinator's FLOW_CYCLE for a cyclic flow (exit 1) and creates nothing", async () => {
    const before = await jobCount();
    const path = await flowFile('cycle.json', {
      jobs: [
        { ref: 'start', taskType: 'SHA256', payload: { text: 's' } },
        { ref: 'a', taskType: 'SHA256', payload: { text: 'a' }, dependsOn: ['start', 'c'] },
        { ref: 'b', taskType: 'SHA256', payload: { text: 'b' }, dependsOn: ['a'] },
        { ref: 'c', taskType: 'SHA256', payload: { text: 'c' }, dependsOn: ['b'] },
      ],
    });
    const out = await cli('submit-flow', path);
    assert.equal(out.code, 1, out.stderr);
    assert.equal(out.stdout, '');
    assert.match(out.stderr, /FLOW_CYCLE/);
    assert.match(out.stderr, /the dependencies form a cycle \(through ref "[abc]"\)/);
    const json = await cli('submit-flow', path, '--json');
    assert.equal(json.code, 1);
    const { error } = JSON.parse(json.stdout) as { error: { code: string; message: string } };
    assert.equal(error.code, 'FLOW_CYCLE');
    assert.match(error.message, /cycle/);
    assert.equal(await jobCount(), before);
  });

  it('gives a flow file with keys sent twice the same jobs, and refuses a key used differently', async () => {
    const doc = {
      jobs: [
        { ref: 'a', taskType: 'SHA256', payload: { text: 'a' }, idempotencyKey: 'cli-flow/a' },
        {
          ref: 'b',
          taskType: 'SHA256',
          payload: { text: 'b' },
          dependsOn: ['a'],
          idempotencyKey: 'cli-flow/b',
        },
      ],
    };
    const path = await flowFile('keyed.json', doc);
    const first = await cli('submit-flow', path, '--json');
    assert.equal(first.code, 0, first.stderr);
    const before = await jobCount();
    const again = await cli('submit-flow', path, '--json');
    assert.equal(again.code, 0, again.stderr);
    assert.deepEqual(JSON.parse(again.stdout), JSON.parse(first.stdout));
    assert.equal(await jobCount(), before, 'nothing new');
    const other = await cli(
      'submit-flow',
      await flowFile('keyed-other.json', {
        jobs: [
          { ref: 'a', taskType: 'SHA256', payload: { text: 'x' }, idempotencyKey: 'cli-flow/a' },
        ],
      }),
    );
    assert.equal(other.code, 1);
    assert.match(other.stderr, /Idempotency key "cli-flow\/a" \(ref "a"\) is already used by job/);
    const empty = await cli(
      'submit-flow',
      await flowFile('keyed-empty.json', {
        jobs: [{ ref: 'a', taskType: 'SHA256', payload: {}, idempotencyKey: '' }],
      }),
    );
    assert.equal(empty.code, 2);
    assert.match(empty.stderr, /jobs\[0\]\.idempotencyKey must be a non-empty string/);
  });

  it('exits 1 with the coordinator error for an unknown ref or an invalid payload', async () => {
    const before = await jobCount();
    const unknown = await cli(
      'submit-flow',
      await flowFile('unknown.json', {
        jobs: [{ ref: 'a', taskType: 'SHA256', payload: { text: 'a' }, dependsOn: ['missing'] }],
      }),
    );
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /Unknown job: missing/);
    const invalid = await cli(
      'submit-flow',
      await flowFile('invalid.json', {
        jobs: [
          { ref: 'a', taskType: 'SHA256', payload: { text: 'a' } },
          { ref: 'b', taskType: 'SHA256', payload: { nope: 1 } },
        ],
      }),
    );
    assert.equal(invalid.code, 1);
    assert.match(invalid.stderr, /jobs\[1\] \(ref "b"\): Invalid payload/);
    assert.equal(await jobCount(), before);
  });

  it('checks --depends-on and --on-parent-failure', async () => {
    const unknown = await cli('submit', 'sha256', '--text', 'x', '--depends-on', 'no-such-job');
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /Unknown job/);
    const badPolicy = await cli(
      'submit',
      'sha256',
      '--text',
      'x',
      '--depends-on',
      'a',
      '--on-parent-failure',
      'maybe',
    );
    assert.equal(badPolicy.code, 2);
    const alone = await cli('submit', 'sha256', '--text', 'x', '--on-parent-failure', 'run');
    assert.equal(alone.code, 2);
    const parent = JSON.parse((await cli('submit', 'sha256', '--text', 'p', '--json')).stdout) as {
      jobId: string;
    };
    const child = await cli(
      'submit',
      'sha256',
      '--text',
      'c',
      '--depends-on',
      parent.jobId,
      '--on-parent-failure',
      'run',
      '--json',
    );
    assert.equal(child.code, 0, child.stderr);
    const job = (JSON.parse(child.stdout) as { job: JobSnapshot }).job;
    assert.deepEqual([job.state, job.dependsOn], ['WAITING', [parent.jobId]]);
  });
});
