/**
 * The benchmarks still run: every one once, at a small size (`--smoke`), and
 * the JSON report has a table for each. Figures are not judged here: speed is
 * measured by `npm run bench`, never asserted by a test.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ROOT } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';

/** Runs dist/bench/`file` with `args` (and node's `nodeArgs`) and answers the JSON lines it printed. */
async function microBenchLines(
  file: string,
  args: string[],
  nodeArgs: string[] = [],
): Promise<unknown[]> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [...nodeArgs, join(ROOT, 'dist', 'bench', file), ...args],
    { encoding: 'utf8', timeout: 60_000 },
  );
  return stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as unknown);
}

describe('benchmarks (smoke run)', () => {
  const tmp = tempDir('dtp-bench-smoke-');
  after(() => tmp.remove());

  it('runs every benchmark and writes a JSON report with a table for each', async () => {
    const out = join(tmp.dir, 'bench.json');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [join(ROOT, 'dist', 'bench', 'run.js'), '--smoke', '--reps', '5', '--out', out],
      // About 2.5 minutes alone on 2 cores; a limit for a hang, not a speed check.
      { encoding: 'utf8', timeout: 480_000, maxBuffer: 4 * 1024 * 1024 },
    );
    const report = JSON.parse(readFileSync(out, 'utf8')) as Record<string, unknown>;
    assert.equal(report.smoke, true);
    // Every benchmark `npm run bench -- <name>` names in the documents.
    for (const name of [
      'queue-depth',
      'routing',
      'fairness',
      'rate',
      'recovery',
      'throughput',
      'bulk',
      'overload',
      'latency',
      'security',
      'subscribers',
      'delayed',
      'flows',
      'many-attempts',
      'dedup',
      'signals',
      'sharded',
    ]) {
      const entry = report[name] as { table: string[][] } | undefined;
      assert.ok(entry !== undefined && entry.table.length >= 2, `${name} has a table`);
      assert.match(stdout, new RegExp(`### ${name}`));
    }
  });

  it('runs the fan-out micro-benchmark small and prints its JSON line', async () => {
    const lines = await microBenchLines('fanout.js', [
      '--subscribers',
      '5',
      '--jobs',
      '100',
      '--reps',
      '1',
    ]);
    assert.equal(lines.length, 1, 'one JSON line');
    const line = lines[0] as { subscribers: number; eventsPerJobAndSubscriber: number };
    assert.equal(line.subscribers, 5);
    assert.ok(line.eventsPerJobAndSubscriber > 0, 'the subscribers received events');
  });

  it('runs the codec micro-benchmark small and prints one JSON line per message', async () => {
    const lines = (await microBenchLines('codec.js', ['--count', '1000', '--reps', '1'])) as {
      type: string;
      decodeNs: number;
      encodeNs: number;
    }[];
    assert.deepEqual(
      lines.map((line) => line.type),
      ['TASK_ASSIGN', 'TASK_RESULT', 'JOB_EVENT'],
    );
    for (const line of lines) assert.ok(line.decodeNs > 0 && line.encodeNs > 0, line.type);
  });

  it('runs the thread-hop micro-benchmark small and prints one JSON line per kind', async () => {
    const lines = (await microBenchLines('thread-hop.js', ['--count', '200', '--reps', '1'])) as {
      kind: string;
      cpuUsPerRoundTrip: number;
    }[];
    assert.deepEqual(
      lines.map((line) => line.kind),
      ['message-number', 'message-attempt', 'atomics'],
    );
    for (const line of lines) assert.ok(line.cpuUsPerRoundTrip > 0, line.kind);
  });

  it('runs the held-costs measurement small and prints one JSON line per kind', async () => {
    const lines = (await microBenchLines(
      'held-costs.js',
      ['--connections', '20', '--waits', '200', '--stalled', '4'],
      ['--expose-gc'],
    )) as { kind: string; count: number; bytesEach: number }[];
    assert.deepEqual(
      lines.map((line) => line.kind),
      ['idle-connection', 'idle-subscription', 'held-wait', 'stalled-subscriber'],
    );
    for (const line of lines) assert.ok(line.count > 0, line.kind);
  });
});
