/**
 * Entry point of `scripts/worker.sh [flags]`: runs one worker in the
 * foreground, reconnecting forever while its coordinator is away, until
 * SIGINT/SIGTERM.
 */
import { randomBytes } from 'node:crypto';
import { MAX_CAPACITY } from '../protocol/limits.js';
import { Worker } from '../worker/worker.js';
import type { WorkerOptions } from '../worker/worker.js';
import { UsageError } from './flags.js';
import type { FlagSpec, FlagValues } from './flags.js';
import {
  FORCE_EXIT_AFTER_MS,
  LOG_FLAGS,
  exitOnStartFailure,
  loggerFrom,
  parseServerFlags,
  stopOnSignals,
} from './lifecycle.js';

const PROGRAM = 'worker.sh';
const SUMMARY = 'Runs a dtp worker: registers with a coordinator and runs the tasks it assigns.';
const INT32_MAX = 2_147_483_647;

const FLAGS: readonly FlagSpec[] = [
  {
    name: 'coordinator-host',
    type: 'string',
    default: 'localhost',
    placeholder: 'host',
    help: "coordinator's host",
  },
  {
    name: 'coordinator-port',
    type: 'int',
    min: 1,
    max: 65_535,
    default: 7070,
    help: "coordinator's worker port",
  },
  {
    name: 'id',
    type: 'string',
    defaultLabel: 'worker-<8 random hex>',
    placeholder: 'id',
    help: 'worker id, unique among live workers',
  },
  {
    name: 'capacity',
    type: 'int',
    min: 1,
    max: MAX_CAPACITY,
    default: 4,
    help: 'tasks run at once',
  },
  {
    name: 'heartbeat-interval-millis',
    type: 'int',
    min: 1,
    max: INT32_MAX,
    default: 2000,
    help: 'time between heartbeats',
  },
  {
    name: 'reconnect-delay-millis',
    type: 'int',
    min: 1,
    max: INT32_MAX,
    default: 2000,
    help: 'wait before dialling again after a lost connection',
  },
  {
    name: 'drain-timeout-millis',
    type: 'int',
    min: 0,
    max: INT32_MAX,
    default: 30_000,
    help: 'on SIGINT/SIGTERM, time running tasks get to finish before they are released',
  },
  ...LOG_FLAGS,
];

/** `worker-` and 8 random hex digits. */
function randomWorkerId(): string {
  return `worker-${randomBytes(4).toString('hex')}`;
}

function buildOptions(values: FlagValues): WorkerOptions {
  const workerId = values.optionalString('id') ?? randomWorkerId();
  if (workerId.trim() === '') throw new UsageError('--id must not be blank');
  return {
    coordinatorHost: values.string('coordinator-host'),
    coordinatorPort: values.int('coordinator-port'),
    workerId,
    capacity: values.int('capacity'),
    heartbeatIntervalMs: values.int('heartbeat-interval-millis'),
    reconnectDelayMs: values.int('reconnect-delay-millis'),
    logger: loggerFrom(values, 'worker'),
  };
}

const values = parseServerFlags(process.argv.slice(2), PROGRAM, SUMMARY, FLAGS);
let options: WorkerOptions;
let worker: Worker;
try {
  options = buildOptions(values);
  worker = Worker.start(options);
} catch (err) {
  if (err instanceof UsageError) {
    process.stderr.write(`${PROGRAM}: ${err.message}\n`);
    process.exit(2);
  }
  exitOnStartFailure(PROGRAM, err);
}
options.logger.info(
  {
    workerId: options.workerId,
    coordinator: `${options.coordinatorHost}:${options.coordinatorPort}`,
    capacity: options.capacity,
  },
  'worker started',
);
const drainTimeoutMs = values.int('drain-timeout-millis');
// SIGINT/SIGTERM drain: no new tasks, running ones get drainTimeoutMs to finish.
stopOnSignals(
  options.logger,
  () => worker.drain(drainTimeoutMs),
  drainTimeoutMs + FORCE_EXIT_AFTER_MS,
);
