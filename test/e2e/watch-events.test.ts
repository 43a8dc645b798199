/**
 * `client.sh watch` and `client.sh events` through the real scripts: watch
 * prints the job now, then its changes, and exits when it is terminal (exit
 * 4 under --exit-status for a failed job); `events --type` streams a new
 * job's changes as JSON lines; and `watch` across a kill -9 and restart of
 * the coordinator still ends with the job's end.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ROOT, ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { CUSTOM_TASKS_MODULE, tempDir } from '../helpers/test-coordinator.js';

const HOST = '127.0.0.1';

interface Line {
  event: string;
  atMillis: number;
  job: { jobId: string; state: string; progress?: { fraction: number } };
}

function parseLines(text: string): Line[] {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Line);
}

describe('watch and events through the scripts', { timeout: 120_000 }, () => {
  const temp = tempDir('dtp-e2e-watch-');
  const procs: ScriptProcess[] = [];
  after(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    temp.remove();
  });

  async function cluster(database: string, ports?: { workerPort: number; clientPort: number }) {
    const c = await startCoordinatorProcess(['--database', database], ports);
    procs.push(c.proc);
    return c;
  }

  function worker(workerPort: number, id: string): ScriptProcess {
    const proc = ScriptProcess.start('worker.sh', [
      ...['--coordinator-host', HOST, '--coordinator-port', String(workerPort)],
      ...['--id', id, '--heartbeat-interval-millis', '100', '--reconnect-delay-millis', '100'],
      ...['--tasks', CUSTOM_TASKS_MODULE],
    ]);
    procs.push(proc);
    return proc;
  }

  const client = (port: number, ...args: string[]) =>
    spawnSync(
      join(ROOT, 'scripts', 'client.sh'),
      [...args, '--host', HOST, '--port', String(port)],
      {
        encoding: 'utf8',
        timeout: 60_000,
      },
    );

  it('watch prints current, progress and state lines and exits when the job ends', async () => {
    const c = await cluster(':memory:');
    worker(c.workerPort, 'e2e-watch');
    await c.proc.waitForOutput(/worker registered workerId=e2e-watch/);
    const submitted = client(
      c.clientPort,
      'submit',
      'progress.steps',
      '--payload',
      '{"steps":3,"stepMs":300}',
      '--json',
    );
    const jobId = (JSON.parse(submitted.stdout) as { jobId: string }).jobId;
    const watched = client(c.clientPort, 'watch', jobId, '--json');
    assert.equal(watched.status, 0, watched.stderr);
    const lines = parseLines(watched.stdout);
    assert.equal(lines[0]?.event, 'current');
    assert.ok(
      lines.some((l) => l.event === 'progress'),
      watched.stdout,
    );
    assert.deepEqual([lines.at(-1)?.event, lines.at(-1)?.job.state], ['state', 'COMPLETED']);
    for (const line of lines) assert.deepEqual(Object.keys(line), ['event', 'atMillis', 'job']);

    const failed = client(c.clientPort, 'submit', 'refuse', '--payload', '{}', '--json');
    const failedId = (JSON.parse(failed.stdout) as { jobId: string }).jobId;
    const exit = client(c.clientPort, 'watch', failedId, '--exit-status');
    assert.equal(exit.status, 4, exit.stdout + exit.stderr);
    assert.match(exit.stdout, /FAILED/);
  });

  it('events --type streams a new job as state events until interrupted', async () => {
    const c = await cluster(':memory:');
    worker(c.workerPort, 'e2e-events');
    await c.proc.waitForOutput(/worker registered workerId=e2e-events/);
    const events = ScriptProcess.start('client.sh', [
      ...['events', '--type', 'reverse', '--json'],
      ...['--host', HOST, '--port', String(c.clientPort)],
    ]);
    procs.push(events);
    // The subscription is in place once the coordinator counts it; until then, submit again.
    let jobId = '';
    for (let i = 0; i < 50 && !events.output.includes('"COMPLETED"'); i++) {
      client(c.clientPort, 'submit', 'stats.sum', '--payload', '{"values":[1]}');
      const s = client(c.clientPort, 'submit', 'reverse', '--payload', '{"text":"abc"}', '--json');
      jobId = (JSON.parse(s.stdout) as { jobId: string }).jobId;
      await events.waitForOutput(new RegExp(`"${jobId}".*"COMPLETED"`), 2_000).catch(() => null);
    }
    const lines = parseLines(events.output);
    assert.ok(lines.length > 0, events.output);
    assert.ok(lines.every((l) => l.event === 'state' || l.event === 'progress'));
    assert.ok(lines.some((l) => l.job.jobId === jobId && l.job.state === 'COMPLETED'));
    assert.ok(!events.output.includes('stats.sum'), 'only the task type asked for');
    await events.stop();
  });

  it('watch keeps going across a kill -9 and restart of the coordinator', async () => {
    const database = join(temp.dir, 'watch.db');
    let c = await cluster(database);
    const submitted = client(
      c.clientPort,
      'submit',
      'reverse',
      '--payload',
      '{"text":"abc"}',
      '--json',
    );
    const jobId = (JSON.parse(submitted.stdout) as { jobId: string }).jobId;
    const watch = ScriptProcess.start('client.sh', [
      ...['watch', jobId, '--json'],
      ...['--host', HOST, '--port', String(c.clientPort)],
    ]);
    procs.push(watch);
    await watch.waitForOutput(/"current"/);
    await c.proc.kill();
    c = await cluster(database, { workerPort: c.workerPort, clientPort: c.clientPort });
    worker(c.workerPort, 'e2e-after-kill');
    assert.equal(await watch.exited, 0, watch.output);
    const lines = parseLines(
      watch.output
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .join('\n'),
    );
    assert.equal(lines.at(-1)?.job.state, 'COMPLETED');
    assert.match(watch.output, /reconnected/);
  });
});
