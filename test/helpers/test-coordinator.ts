/**
 * Starts a real coordinator in-process on ephemeral 127.0.0.1 ports with
 * millisecond timings, for integration tests. Set DTP_TEST_LOG=1 to see its
 * log lines.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Coordinator, type CoordinatorDeps } from '../../src/coordinator/coordinator.js';
import { startHttpPort } from '../../src/http/http-server.js';
import type { CoreEvent } from '../../src/coordinator/core/types.js';
import {
  DEFAULT_COORDINATOR_OPTIONS,
  type CoordinatorOptions,
} from '../../src/coordinator/options.js';
import { createLogger, type Logger } from '../../src/observability/logger.js';
import { silentLogger } from './logger.js';
import { startWorker, type StartWorkerOptions } from '../../src/worker/start-worker.js';
import { Worker } from '../../src/worker/worker.js';

/** Short timings used unless a test overrides them. */
export const FAST_TIMINGS = {
  heartbeatTimeoutMs: 300,
  sweepIntervalMs: 10,
  retryBaseDelayMs: 10,
  retryMaxDelayMs: 50,
  taskTimeoutMs: 60_000,
} as const;

export function testLogger(name: string): Logger {
  return process.env.DTP_TEST_LOG === '1' ? createLogger({ name }) : silentLogger();
}

/** A fresh temporary folder, removed by the returned function. */
export function tempDir(prefix = 'dtp-test-'): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return {
    dir,
    remove: () => rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 }),
  };
}

export interface TestCoordinator {
  coordinator: Coordinator;
  options: CoordinatorOptions;
  /** Every event so far, in order. */
  events: CoreEvent[];
  /** Resolves with the first event (past or future) matching the predicate. */
  waitForEvent<T extends CoreEvent['type']>(
    type: T,
    predicate?: (event: Extract<CoreEvent, { type: T }>) => boolean,
    timeoutMs?: number,
  ): Promise<Extract<CoreEvent, { type: T }>>;
  close(): Promise<void>;
}

export async function startCoordinator(
  overrides: Partial<CoordinatorOptions> = {},
  deps: CoordinatorDeps = {},
): Promise<TestCoordinator> {
  const options: CoordinatorOptions = {
    ...DEFAULT_COORDINATOR_OPTIONS,
    ...FAST_TIMINGS,
    workerPort: 0,
    clientPort: 0,
    bindHost: '127.0.0.1',
    databasePath: ':memory:',
    logger: testLogger('coordinator'),
    ...overrides,
  };
  const coordinator = await Coordinator.start(options, { httpPort: startHttpPort, ...deps });
  const events: CoreEvent[] = [];
  coordinator.events.on('event', (event) => events.push(event));
  const waitForEvent: TestCoordinator['waitForEvent'] = (type, predicate, timeoutMs = 5_000) => {
    type E = Extract<CoreEvent, { type: typeof type }>;
    const matches = (event: CoreEvent): event is E =>
      event.type === type && (predicate === undefined || predicate(event as E));
    const seen = events.find(matches);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const listener = (event: CoreEvent): void => {
        if (!matches(event)) return;
        clearTimeout(timer);
        coordinator.events.off('event', listener);
        resolve(event);
      };
      const timer = setTimeout(() => {
        coordinator.events.off('event', listener);
        reject(new Error(`no ${type} event within ${timeoutMs} ms`));
      }, timeoutMs);
      coordinator.events.on('event', listener);
    });
  };
  return { coordinator, options, events, waitForEvent, close: () => coordinator.close() };
}

/** The compiled test task module (test/fixtures/custom-tasks.ts). */
export const CUSTOM_TASKS_MODULE = fileURLToPath(
  new URL('../fixtures/custom-tasks.js', import.meta.url),
);

/**
 * A real worker that loads task modules (the fixture by default), with
 * millisecond timings, in-process, through the embedding API.
 */
export function startTaskWorker(
  workerPort: number,
  workerId: string,
  options: StartWorkerOptions = {},
): Promise<Worker> {
  return startWorker({
    coordinatorHost: '127.0.0.1',
    coordinatorPort: workerPort,
    workerId,
    capacity: 1,
    heartbeatIntervalMs: 50,
    reconnectDelayMs: 50,
    tasks: [CUSTOM_TASKS_MODULE],
    logger: testLogger('worker'),
    ...options,
  });
}

/** A real worker (task threads and all) with millisecond timings, in-process. */
export function startRealWorker(workerPort: number, workerId: string, capacity: number): Worker {
  return Worker.start({
    coordinatorHost: '127.0.0.1',
    coordinatorPort: workerPort,
    workerId,
    capacity,
    heartbeatIntervalMs: 50,
    reconnectDelayMs: 50,
    logger: testLogger('worker'),
  });
}
