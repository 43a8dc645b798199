/**
 * Takes the README's picture of the dashboard: a coordinator (SQLite in a
 * temporary folder) with its HTTP port, three workers, and a few minutes of
 * mixed load (hashes, sleeps of varied length, some failing jobs retried),
 * then a screenshot of the overview in headless Chromium.
 *
 *     npm run build && node dist/bench/dashboard-screenshot.js docs/dashboard.png [minutes]
 *
 * Bounded: the picture is taken after the given minutes (default 4, at most
 * 30) and the load stops right after it;
 * everything talks to 127.0.0.1 only.
 */
import { startHttpPort } from '../src/http/http-server.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DtpClient } from '../src/client/client.js';
import { Coordinator } from '../src/coordinator/coordinator.js';
import { DEFAULT_COORDINATOR_OPTIONS } from '../src/coordinator/options.js';
import { silentLogger } from '../test/helpers/logger.js';
import { Worker } from '../src/worker/worker.js';
import { launchBrowser } from '../test/helpers/browser.js';

const out = process.argv[2] ?? 'docs/dashboard.png';
const minutes = Math.min(30, Math.max(1, Number(process.argv[3] ?? 4)));

const dir = mkdtempSync(join(tmpdir(), 'dtp-shot-'));
const coordinator = await Coordinator.start(
  {
    ...DEFAULT_COORDINATOR_OPTIONS,
    workerPort: 0,
    clientPort: 0,
    metricsPort: 0,
    bindHost: '127.0.0.1',
    databasePath: join(dir, 'coordinator.db'),
    retryBaseDelayMs: 500,
    logger: silentLogger(),
  },
  { httpPort: startHttpPort },
);
const workers = ['worker-a', 'worker-b', 'worker-c'].map((workerId) =>
  Worker.start({
    coordinatorHost: '127.0.0.1',
    coordinatorPort: coordinator.workerPort,
    workerId,
    capacity: 4,
    heartbeatIntervalMs: 1_000,
    reconnectDelayMs: 500,
    logger: silentLogger(),
  }),
);
const client = await DtpClient.connect({ host: '127.0.0.1', port: coordinator.clientPort });

/** One submission of the mix; the rate swells and ebbs so the chart has a shape. */
async function submitOne(i: number): Promise<void> {
  const priority = i % 7 === 0 ? 'HIGH' : i % 5 === 0 ? 'LOW' : 'NORMAL';
  if (i % 23 === 0) {
    // Fails twice: retried once, then FAILED.
    await client.submit({
      taskType: 'FAIL',
      payload: { failUntilAttempt: 3 },
      maxAttempts: 2,
      priority,
    });
  } else if (i % 17 === 0) {
    // Fails once, then succeeds on the retry.
    await client.submit({
      taskType: 'FAIL',
      payload: { failUntilAttempt: 2 },
      maxAttempts: 3,
      priority,
    });
  } else if (i % 3 === 0) {
    await client.submit({
      taskType: 'SLEEP',
      payload: { durationMillis: 200 + (i % 9) * 150 },
      priority,
    });
  } else {
    await client.submit({ taskType: 'SHA256', payload: { text: `document ${i}` }, priority });
  }
}

/** A small deterministic jitter, so the load does not look drawn with a ruler. */
function jitter(n: number): number {
  const x = Math.sin(n * 12.9898) * 43758.5453;
  return x - Math.floor(x);
}

// The load runs on while the picture is taken: the page shows jobs flowing.
let loading = true;
let i = 0;
const load = (async () => {
  for (let second = 0; loading; second++) {
    const wave = 0.5 + 0.5 * Math.sin((second / 90) * Math.PI);
    const perSecond = Math.round(12 + 30 * wave + 10 * jitter(second));
    for (let k = 0; k < perSecond && loading; k++) await submitOne(i++);
    await sleep(1_000);
  }
})();
await sleep(minutes * 60_000);

const browser = await launchBrowser({ width: 1280, height: 760 });
try {
  await browser.page.goto(`http://127.0.0.1:${coordinator.httpPort}/`);
  await browser.page.waitForSelector('[data-testid=overview]');
  await browser.page.waitForSelector('[data-testid=live-status]:has-text("live")');
  await sleep(1_500);
  await browser.page.screenshot({ path: out });
  process.stdout.write(`wrote ${out} after ${i} submissions\n`);
} finally {
  loading = false;
  await load;
  await browser.close();
  await client.close();
  await Promise.all(workers.map((w) => w.close()));
  await coordinator.close();
  rmSync(dir, { recursive: true, force: true });
}
