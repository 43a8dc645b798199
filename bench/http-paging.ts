/**
 * How fast the dashboard's job list answers over a large history: a SQLite
 * database with N jobs (default 10^6; 1 % QUEUED, the rest COMPLETED, all
 * SHA256) behind a coordinator with its HTTP port, then `GET /api/jobs`
 * timed (median of 20 requests each, HTTP round trip included) for the
 * first page, a page deep in the history (by cursor), the filters, and a
 * search.
 *
 *     npm run build && node dist/bench/http-paging.js [jobs]
 *
 * Talks to 127.0.0.1 only; the database lives in a temporary folder.
 */
import { startHttpPort } from '../src/http/http-server.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Coordinator } from '../src/coordinator/coordinator.js';
import { DEFAULT_COORDINATOR_OPTIONS } from '../src/coordinator/options.js';
import { silentLogger } from '../test/helpers/logger.js';
import { median } from './harness.js';
import { writeHistory } from './recovery.js';

const jobs = Number(process.argv[2] ?? 1_000_000);
const dir = mkdtempSync(join(tmpdir(), 'dtp-paging-'));
const path = join(dir, 'coordinator.db');
const writeStarted = performance.now();
await writeHistory(path, jobs);
process.stdout.write(`wrote ${jobs} jobs in ${Math.round(performance.now() - writeStarted)} ms\n`);

const coordinator = await Coordinator.start(
  {
    ...DEFAULT_COORDINATOR_OPTIONS,
    workerPort: 0,
    clientPort: 0,
    metricsPort: 0,
    bindHost: '127.0.0.1',
    databasePath: path,
    maxActiveJobs: 1_000_000,
    logger: silentLogger(),
  },
  { httpPort: startHttpPort },
);
const base = `http://127.0.0.1:${coordinator.httpPort}`;

async function timeMs(query: string): Promise<number> {
  const runs: number[] = [];
  for (let i = 0; i < 20; i++) {
    const started = performance.now();
    const res = await fetch(`${base}/api/jobs?${query}`);
    await res.json();
    if (res.status !== 200) throw new Error(`${query}: ${res.status}`);
    runs.push(performance.now() - started);
  }
  return median(runs);
}

const middleId = `00000000-0000-4000-8000-${Math.floor(jobs / 2)
  .toString(16)
  .padStart(12, '0')}`;
const cases: [string, string][] = [
  ['first page (50)', 'limit=50'],
  ['page at the middle (cursor)', `limit=50&cursor=${Math.floor(jobs / 2)}`],
  ['page at the oldest jobs (cursor)', 'limit=50&cursor=60'],
  ['state=QUEUED (1 %)', 'limit=50&state=QUEUED'],
  ['state=QUEUED, deep cursor', `limit=50&state=QUEUED&cursor=${Math.floor(jobs / 2)}`],
  ['type=SHA256', 'limit=50&type=SHA256'],
  ['state=QUEUED&type=SHA256', 'limit=50&state=QUEUED&type=SHA256'],
  ['state=QUEUED&type=OTHER (no match)', 'limit=50&state=QUEUED&type=OTHER'],
  ['state=COMPLETED&type=OTHER (no match)', 'limit=50&state=COMPLETED&type=OTHER'],
  ['search by job id', `search=${middleId}`],
  ['search, unknown', 'search=nothing-like-this'],
];
try {
  process.stdout.write('| request | median ms |\n| --- | --- |\n');
  for (const [name, query] of cases) {
    process.stdout.write(`| ${name} | ${(await timeMs(query)).toFixed(1)} |\n`);
  }
} finally {
  await coordinator.close();
  rmSync(dir, { recursive: true, force: true });
}
