/**
 * Users' task modules through the real scripts: a worker started with a
 * module that cannot be used exits 2 at start with a message naming the
 * module and the problem; a good module runs its tasks for `client.sh
 * submit <TYPE> --payload`.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ROOT, ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { CUSTOM_TASKS_MODULE, tempDir } from '../helpers/test-coordinator.js';

const HOST = '127.0.0.1';

describe('task modules through the scripts', () => {
  const temp = tempDir('dtp-e2e-modules-');
  const procs: ScriptProcess[] = [];

  before(() => {
    const files: Record<string, string> = {
      'good.mjs': `export default { 'text.upper': async (p) => String(p.text).toUpperCase() };`,
      'same.mjs': `export default { 'text.upper': async () => 'again' };`,
      'broken.mjs': `import './missing-helper.mjs';\nexport default {};`,
      'empty.mjs': `export default {};`,
      'reserved.mjs': `export default { 'Prime-Count': async () => 1 };`,
      'not-a-map.mjs': `export default 42;`,
    };
    for (const [name, text] of Object.entries(files)) writeFileSync(join(temp.dir, name), text);
  });
  after(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    temp.remove();
  });

  /** Runs `worker.sh` with `args` in the temp folder until it exits (it must, at start). */
  async function failedStart(args: string[], env: NodeJS.ProcessEnv = {}) {
    const proc = ScriptProcess.start(
      'worker.sh',
      ['--coordinator-port', '1', '--reconnect-delay-millis', '60000', ...args],
      { cwd: temp.dir, env },
    );
    procs.push(proc);
    const code = await proc.exited;
    return { code, output: proc.output };
  }

  it('exits 2 naming the module and the problem when a module cannot be used', async () => {
    const cases: [string[], RegExp][] = [
      [
        ['--tasks', './broken.mjs'],
        /task module \.\/broken\.mjs: cannot be loaded: .*missing-helper/,
      ],
      [['--tasks', './empty.mjs'], /task module \.\/empty\.mjs: exports no tasks/],
      [
        ['--tasks', './reserved.mjs'],
        /task module \.\/reserved\.mjs: task name "Prime-Count" is reserved/,
      ],
      [
        ['--tasks', './not-a-map.mjs'],
        /task module \.\/not-a-map\.mjs: its default export must map/,
      ],
      [['--tasks', './nowhere.mjs'], /task module \.\/nowhere\.mjs: cannot be found/],
      [['--tasks', 'no-such-package'], /task module no-such-package: cannot be found/],
      [
        ['--tasks', './good.mjs', '--tasks', './same.mjs'],
        /task module \.\/same\.mjs: task "text\.upper" is already declared by task module \.\/good\.mjs/,
      ],
    ];
    for (const [args, message] of cases) {
      const { code, output } = await failedStart(args);
      assert.equal(code, 2, `${args.join(' ')}: ${output}`);
      assert.match(output, message);
    }
  });

  it('exits 2 when --prefetch is more than 4 x --capacity', async () => {
    const { code, output } = await failedStart(['--capacity', '2', '--prefetch', '9']);
    assert.equal(code, 2);
    assert.match(output, /--prefetch must be at most 4 x --capacity \(8\), got 9/);
  });

  it('starts with --capacity 600: the default prefetch (4 x capacity) is within every bound below', async () => {
    const proc = ScriptProcess.start(
      'worker.sh',
      ['--coordinator-port', '1', '--reconnect-delay-millis', '60000', '--capacity', '600'],
      { cwd: temp.dir },
    );
    procs.push(proc);
    await proc.waitForOutput(/worker started.*capacity=600.*prefetch=2400/);
    assert.equal(proc.running, true, proc.output);
  });

  it('reads DTP_TASKS as a comma-separated list when --tasks is not given', async () => {
    const { code, output } = await failedStart([], { DTP_TASKS: './good.mjs,./same.mjs' });
    assert.equal(code, 2);
    assert.match(output, /already declared by task module \.\/good\.mjs/);
  });

  it('runs a custom task submitted with client.sh submit <TYPE> --payload', async () => {
    const c = await startCoordinatorProcess(['--database', ':memory:']);
    procs.push(c.proc);
    const worker = ScriptProcess.start(
      'worker.sh',
      [
        ...['--coordinator-host', HOST, '--coordinator-port', String(c.workerPort)],
        ...['--id', 'e2e-own', '--heartbeat-interval-millis', '100'],
        ...['--tasks', './good.mjs', '--tasks', CUSTOM_TASKS_MODULE],
      ],
      { cwd: temp.dir },
    );
    procs.push(worker);
    await c.proc.waitForOutput(/worker registered workerId=e2e-own/);
    const client = (...args: string[]) =>
      spawnSync(
        join(ROOT, 'scripts', 'client.sh'),
        [...args, '--host', HOST, '--port', String(c.clientPort)],
        {
          encoding: 'utf8',
          timeout: 30_000,
        },
      );
    for (const [type, payload, result] of [
      ['text.upper', { text: 'shout' }, 'SHOUT'],
      ['stats.sum', { values: [4, 5] }, '{"n":2,"sum":9,"attempt":1}'],
    ] as const) {
      const submitted = client('submit', type, '--payload', JSON.stringify(payload), '--quiet');
      assert.equal(submitted.status, 0, submitted.stderr);
      const jobId = submitted.stdout.trim();
      const waited = client('wait', jobId, '--json', '--exit-status');
      assert.equal(waited.status, 0, waited.stdout + waited.stderr);
      const job = JSON.parse(waited.stdout) as { state: string; result: string; taskType: string };
      assert.deepEqual([job.state, job.taskType, job.result], ['COMPLETED', type, result]);
    }
  });
});
