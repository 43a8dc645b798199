/**
 * Entry point of `scripts/worker.sh [flags]`: runs one worker in the
 * foreground, reconnecting forever while its coordinator is away, until
 * SIGINT/SIGTERM.
 */
import { formatHostPort, parseAddressList } from '../net/address.js';
import { describeError } from '../protocol/errors.js';
import { MAX_CAPACITY, MAX_PREFETCH_PER_SLOT, maxPrefetch } from '../protocol/limits.js';
import {
  DEFAULT_WORKER_OPTIONS,
  randomWorkerId,
  startWorker,
  type StartWorkerOptions,
} from '../worker/start-worker.js';
import { TASK_MEMORY_MB } from '../worker/memory-budget.js';
import { TaskModuleError } from '../worker/task-modules.js';
import { DEFAULT_PREFETCH_PER_SLOT, type Worker } from '../worker/worker.js';
import type { Logger } from '../observability/logger.js';
import { UsageError } from './flags.js';
import { DIALLER_SECURITY_FLAGS, clientTlsFrom, tokenFrom } from './security-flags.js';
import { ErrorCode } from '../protocol/error-codes.js';
import type { FlagSpec, FlagValues } from './flags.js';
import {
  FORCE_EXIT_AFTER_MS,
  LOG_FLAGS,
  exitOnStartFailure,
  loggerFrom,
  parseServerFlags,
  stopOnSignals,
} from './lifecycle.js';
import { takeProgramName } from './program-name.js';

const PROGRAM = takeProgramName('worker.sh');
const SUMMARY = 'Runs a dtp worker: registers with a coordinator and runs the tasks it assigns.';
const INT32_MAX = 2_147_483_647;
const D = DEFAULT_WORKER_OPTIONS;

const FLAGS: readonly FlagSpec[] = [
  {
    name: 'coordinator-host',
    type: 'string',
    default: D.coordinatorHost,
    placeholder: 'h1[:p1],h2[:p2],…',
    help: "coordinator's host, or several coordinators sharing PostgreSQL (the worker finds the leader)",
  },
  {
    name: 'coordinator-port',
    type: 'int',
    min: 1,
    max: 65_535,
    default: D.coordinatorPort,
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
    default: D.capacity,
    help: 'tasks run at once',
  },
  {
    name: 'prefetch',
    type: 'int',
    min: 0,
    max: maxPrefetch(MAX_CAPACITY),
    defaultLabel: `${DEFAULT_PREFETCH_PER_SLOT} x capacity`,
    help: `attempts taken beyond capacity and queued here, used by the coordinator only while attempts are short; 0..${MAX_PREFETCH_PER_SLOT} x capacity, 0 turns it off`,
  },
  {
    name: 'heartbeat-interval-millis',
    type: 'int',
    min: 1,
    max: INT32_MAX,
    default: D.heartbeatIntervalMs,
    help: 'time between heartbeats',
  },
  {
    name: 'reconnect-delay-millis',
    type: 'int',
    min: 1,
    max: INT32_MAX,
    default: D.reconnectDelayMs,
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
  {
    name: 'tasks',
    type: 'list',
    placeholder: 'module',
    help: 'task module to load beside the built-ins: a file path or a package name',
  },
  {
    name: 'cancel-grace-millis',
    type: 'int',
    min: 0,
    max: INT32_MAX,
    default: D.cancelGraceMs,
    help: 'after a cancel or deadline, time a task gets to stop before its thread is terminated',
  },
  {
    name: 'task-memory-mb',
    type: 'int',
    min: TASK_MEMORY_MB.min,
    max: TASK_MEMORY_MB.max,
    default: D.taskMemoryMb,
    help: "each task thread's memory budget in MiB: its JavaScript heap stops there, and a thread whose heap and Buffers go over it is terminated, failing its attempt",
  },
  {
    name: 'coordinator-timeout-millis',
    type: 'int',
    min: 1,
    max: INT32_MAX,
    defaultLabel: '3 x heartbeat interval, at least 1000',
    help: 'a coordinator that confirmed heartbeat acks and is silent this long is dropped and redialled',
  },
  ...DIALLER_SECURITY_FLAGS,
  ...LOG_FLAGS,
];

function buildOptions(values: FlagValues): StartWorkerOptions & { logger: Logger } {
  const workerId = values.optionalString('id') ?? randomWorkerId();
  if (workerId.trim() === '') throw new UsageError('--id must not be blank');
  const coordinatorHost = values.string('coordinator-host');
  const coordinatorPort = values.int('coordinator-port');
  try {
    parseAddressList(coordinatorHost, coordinatorPort);
  } catch (err) {
    throw new UsageError(`--coordinator-host: ${describeError(err)}`);
  }
  const capacity = values.int('capacity');
  const prefetch = values.optionalInt('prefetch');
  if (prefetch !== undefined && prefetch > maxPrefetch(capacity)) {
    throw new UsageError(
      `--prefetch must be at most ${MAX_PREFETCH_PER_SLOT} x --capacity (${maxPrefetch(capacity)}), got ${prefetch}`,
    );
  }
  return {
    coordinatorHost,
    coordinatorPort,
    workerId,
    capacity,
    ...optional('prefetch', prefetch),
    heartbeatIntervalMs: values.int('heartbeat-interval-millis'),
    reconnectDelayMs: values.int('reconnect-delay-millis'),
    cancelGraceMs: values.int('cancel-grace-millis'),
    taskMemoryMb: values.int('task-memory-mb'),
    tasks: values.strings('tasks'),
    ...optional('coordinatorTimeoutMs', values.optionalInt('coordinator-timeout-millis')),
    tls: clientTlsFrom(values),
    authToken: tokenFrom(values, process.env),
    logger: loggerFrom(values, 'worker'),
  };
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

/** Starts the worker; a bad task module or option is a usage error (exit 2), naming it. */
async function start(options: StartWorkerOptions): Promise<Worker> {
  try {
    return await startWorker(options);
  } catch (err) {
    if (err instanceof TaskModuleError || err instanceof UsageError) {
      process.stderr.write(`${PROGRAM}: ${err.message}\n`);
      process.exit(2);
    }
    exitOnStartFailure(PROGRAM, err);
  }
}

const values = parseServerFlags(process.argv.slice(2), PROGRAM, SUMMARY, FLAGS);
let options: StartWorkerOptions & { logger: Logger };
try {
  options = buildOptions(values);
} catch (err) {
  if (!(err instanceof UsageError)) throw err;
  process.stderr.write(`${PROGRAM}: ${err.message}\n`);
  process.exit(2);
}
const worker = await start(options);
options.logger.info(
  {
    workerId: worker.workerId,
    coordinator: parseAddressList(options.coordinatorHost ?? '', options.coordinatorPort ?? 0)
      .map(formatHostPort)
      .join(','),
    capacity: worker.capacity,
    prefetch: worker.prefetch,
    taskTypes: worker.taskTypes.join(','),
  },
  'worker started',
);
// A refusal (id taken over, token or certificate refused) is a configuration
// error: say so and exit 1 instead of reconnecting forever.
worker.events.once('refused', (err) => {
  const hint =
    err.code === ErrorCode.Unauthenticated && options.authToken == null
      ? '; give the worker a worker token with --token-file <file> or DTP_TOKEN'
      : '';
  process.stderr.write(
    `${PROGRAM}: refused by the coordinator (${err.code}): ${err.message}${hint}\n`,
  );
  void worker.close().finally(() => process.exit(1));
});
const drainTimeoutMs = values.int('drain-timeout-millis');
// SIGINT/SIGTERM drain: no new tasks, running ones get drainTimeoutMs to finish.
stopOnSignals(
  options.logger,
  () => worker.drain(drainTimeoutMs),
  drainTimeoutMs + FORCE_EXIT_AFTER_MS,
);
