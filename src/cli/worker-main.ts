/**
 * Entry point of `scripts/worker.sh [flags]`: runs one worker in the
 * foreground, reconnecting forever while its coordinator is away, until
 * SIGINT/SIGTERM.
 */
import { MAX_TIMER_MS } from '../common/bounds.js';
import { formatHostPort, parseAddressList } from '../net/address.js';
import {
  DEFAULT_WORKER_OPTIONS,
  randomWorkerId,
  startWorker,
  type StartWorkerOptions,
} from '../worker/start-worker.js';
import {
  DEFAULT_PREFETCH_PER_SLOT,
  DEFAULT_SHARD_REFRESH_MS,
  WORKER_BOUNDS,
  workerOptionsProblem,
  type CheckedWorkerOptions,
} from '../worker/options.js';
import { IsolateError, TaskModuleError } from '../worker/task-modules.js';
import type { Worker } from '../worker/worker.js';
import type { Logger } from '../observability/logger.js';
import { UsageError, boundedFlag } from './flags.js';
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
const D = DEFAULT_WORKER_OPTIONS;
const B = WORKER_BOUNDS;

const FLAGS: readonly FlagSpec[] = [
  {
    name: 'coordinator-host',
    type: 'string',
    default: D.coordinatorHost,
    placeholder: 'h1[:p1],h2[:p2],…',
    help: "coordinator's host, or several coordinators sharing PostgreSQL (the worker finds the leader)",
  },
  boundedFlag('coordinator-port', B.coordinatorPort, {
    default: D.coordinatorPort,
    help: "coordinator's worker port",
  }),
  {
    name: 'id',
    type: 'string',
    defaultLabel: 'worker-<8 random hex>',
    placeholder: 'id',
    help: 'worker id, unique among live workers',
  },
  boundedFlag('capacity', B.capacity, {
    default: D.capacity,
    help: 'attempts run at once, shared and isolated together (thousands are fine for tasks that wait on I/O)',
  }),
  boundedFlag('threads', B.threads, {
    defaultLabel: 'available parallelism',
    help: 'shared task threads: the attempts of tasks not declared isolate run on these, many to a thread',
  }),
  boundedFlag('prefetch', B.prefetch, {
    defaultLabel: `${DEFAULT_PREFETCH_PER_SLOT} x capacity, at most ${B.prefetch.max}`,
    help: `attempts taken beyond capacity and queued here, used by the coordinator only while attempts are short; 0..${B.prefetch.perUnitOf.times} x capacity and at most ${B.prefetch.max}, 0 turns it off`,
  }),
  boundedFlag('heartbeat-interval-millis', B.heartbeatIntervalMs, {
    default: D.heartbeatIntervalMs,
    help: 'time between heartbeats',
  }),
  boundedFlag('reconnect-delay-millis', B.reconnectDelayMs, {
    default: D.reconnectDelayMs,
    help: 'wait before dialling again after a lost connection',
  }),
  {
    name: 'drain-timeout-millis',
    type: 'int',
    min: 0,
    max: MAX_TIMER_MS,
    default: 30_000,
    help: 'on SIGINT/SIGTERM, time running tasks get to finish before they are released',
  },
  {
    name: 'queues',
    type: 'string',
    placeholder: 'a,b',
    defaultLabel: 'every queue',
    help: 'take attempts of these named queues only',
  },
  {
    name: 'tasks',
    type: 'list',
    placeholder: 'module',
    help: 'task module to load beside the built-ins: a file path or a package name',
  },
  {
    name: 'isolate',
    type: 'string',
    placeholder: 'type1,type2',
    defaultLabel: 'as each task declares',
    help: 'run these task types isolated whatever their module declares (built-ins included): each attempt on a task thread of its own, preempted by termination',
  },
  boundedFlag('cancel-grace-millis', B.cancelGraceMs, {
    default: D.cancelGraceMs,
    help: 'after a cancel or deadline, time a task gets to stop before its thread is terminated',
  }),
  boundedFlag('task-memory-mb', B.taskMemoryMb, {
    default: D.taskMemoryMb,
    help: "each task thread's memory budget in MiB: its JavaScript heap stops there, and a thread whose heap and Buffers go over it is terminated (an isolated attempt fails; the attempts of a shared thread are requeued)",
  }),
  boundedFlag('coordinator-timeout-millis', B.coordinatorTimeoutMs, {
    defaultLabel: '3 x heartbeat interval, at least 1000',
    help: 'a coordinator that confirmed heartbeat acks and is silent this long is dropped and redialled',
  }),
  boundedFlag('shard-refresh-millis', B.shardRefreshMs, {
    default: DEFAULT_SHARD_REFRESH_MS,
    help: "with a sharded coordinator, how often the worker asks it where its shards' leaders are (and at once when a shard session is lost)",
  }),
  ...DIALLER_SECURITY_FLAGS,
  ...LOG_FLAGS,
];

/**
 * The flag that sets each checked worker option, so that a refusal names the
 * flag; `connectTimeoutMs` has none (it keeps its default here).
 */
const FLAG_OF: { readonly [K in Exclude<keyof CheckedWorkerOptions, 'connectTimeoutMs'>]: string } =
  {
    coordinatorHost: 'coordinator-host',
    coordinatorPort: 'coordinator-port',
    workerId: 'id',
    capacity: 'capacity',
    threads: 'threads',
    prefetch: 'prefetch',
    heartbeatIntervalMs: 'heartbeat-interval-millis',
    reconnectDelayMs: 'reconnect-delay-millis',
    cancelGraceMs: 'cancel-grace-millis',
    taskMemoryMb: 'task-memory-mb',
    coordinatorTimeoutMs: 'coordinator-timeout-millis',
    shardRefreshMs: 'shard-refresh-millis',
    queues: 'queues',
  };

function buildOptions(values: FlagValues): StartWorkerOptions & { logger: Logger } {
  const checked: CheckedWorkerOptions = {
    coordinatorHost: values.string('coordinator-host'),
    coordinatorPort: values.int('coordinator-port'),
    workerId: values.optionalString('id') ?? randomWorkerId(),
    capacity: values.int('capacity'),
    ...optional('threads', values.optionalInt('threads')),
    ...optional('prefetch', values.optionalInt('prefetch')),
    heartbeatIntervalMs: values.int('heartbeat-interval-millis'),
    reconnectDelayMs: values.int('reconnect-delay-millis'),
    cancelGraceMs: values.int('cancel-grace-millis'),
    taskMemoryMb: values.int('task-memory-mb'),
    ...optional('coordinatorTimeoutMs', values.optionalInt('coordinator-timeout-millis')),
    shardRefreshMs: values.int('shard-refresh-millis'),
    ...optional('queues', queuesFrom(values)),
  };
  const problem = workerOptionsProblem(
    checked,
    (key) => (key === 'connectTimeoutMs' ? key : `--${FLAG_OF[key]}`),
    'atMost',
  );
  if (problem !== null) throw new UsageError(problem);
  return {
    ...checked,
    tasks: values.strings('tasks'),
    ...optional('isolate', listFrom(values.optionalString('isolate'))),
    tls: clientTlsFrom(values),
    authToken: tokenFrom(values, process.env),
    logger: loggerFrom(values, 'worker'),
  };
}

function queuesFrom(values: FlagValues): string[] | undefined {
  return listFrom(values.optionalString('queues'));
}

function listFrom(text: string | undefined): string[] | undefined {
  return text === undefined ? undefined : text.split(',').map((name) => name.trim());
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

/** Starts the worker; a bad task module or option is a usage error (exit 2), naming it. */
async function start(options: StartWorkerOptions): Promise<Worker> {
  try {
    return await startWorker(options);
  } catch (err) {
    if (err instanceof IsolateError) {
      process.stderr.write(`${PROGRAM}: --${err.message}\n`);
      process.exit(2);
    }
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
    threads: worker.threads,
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
