/**
 * Entry point of `scripts/coordinator.sh [flags]`: runs one coordinator in the
 * foreground until SIGINT/SIGTERM. The coordinator logs the ports it bound
 * (`workerPort=<n> clientPort=<n>`) itself.
 */
import { readFileSync } from 'node:fs';
import { Coordinator } from '../coordinator/coordinator.js';
import { startHttpPort } from '../http/http-server.js';
import { relationProblem } from '../common/bounds.js';
import {
  COORDINATOR_BOUNDS,
  COORDINATOR_RELATIONS,
  DEFAULT_COORDINATOR_OPTIONS,
  DURABILITIES,
  type CoordinatorOptions,
} from '../coordinator/options.js';
import { DtpError, describeError } from '../protocol/errors.js';
import { LocalErrorCode } from '../protocol/error-codes.js';
import { MAX_SHARDS } from '../protocol/shards.js';
import { ShardedCoordinator } from '../server/sharding/sharded-coordinator.js';
import { isSharedDatabase } from '../store/open-store.js';
import { UsageError, boundedFlag, type FlagSpec, type FlagValues } from './flags.js';
import {
  COORDINATOR_SECURITY_FLAGS,
  HTTP_HOST_FLAGS,
  LIMIT_FLAGS,
  httpAllowedHostsFrom,
  netLimitsFrom,
  securityOptionsFrom,
  CLIENT_BUDGET_FLAGS,
  clientBudgetsFrom,
} from './coordinator-flags.js';
import {
  LOG_FLAGS,
  exitOnStartFailure,
  loggerFrom,
  parseServerFlags,
  stopOnSignals,
} from './lifecycle.js';
import { takeProgramName } from './program-name.js';

const PROGRAM = takeProgramName('coordinator.sh');
const SUMMARY =
  'Runs a dtp coordinator: accepts jobs on the client port, schedules them onto workers ' +
  'connected to the worker port, and keeps them in SQLite, or in PostgreSQL shared by ' +
  'several coordinators of which one leads.';

const D = DEFAULT_COORDINATOR_OPTIONS;
const B = COORDINATOR_BOUNDS;

const FLAGS: readonly FlagSpec[] = [
  boundedFlag('worker-port', B.workerPort, {
    default: D.workerPort,
    help: 'port for workers; 0 = any free port',
  }),
  boundedFlag('client-port', B.clientPort, {
    default: D.clientPort,
    help: 'port for clients; 0 = any free port',
  }),
  {
    name: 'bind-host',
    type: 'string',
    default: D.bindHost,
    placeholder: 'host',
    help: 'interface to listen on',
  },
  {
    name: 'database',
    type: 'string',
    default: D.databasePath,
    placeholder: 'path|url',
    help:
      'SQLite file, parent folders created; :memory: = not durable; or postgres://user[:password]@host:port/db ' +
      '(several coordinators, one leads)',
  },
  {
    name: 'database-file',
    type: 'string',
    placeholder: 'file',
    defaultLabel: 'none',
    help: 'read --database from the first line of this file (keeps a password out of argv)',
  },
  {
    name: 'advertise-host',
    type: 'string',
    placeholder: 'host',
    defaultLabel: '--bind-host unless a wildcard, else the host name',
    help: 'the host others should use to reach this coordinator (what a standby names as leader)',
  },
  {
    name: 'shards',
    type: 'int',
    min: 1,
    max: MAX_SHARDS,
    default: 1,
    help:
      'PostgreSQL: split the queues into this many shards, each led by one of the coordinators ' +
      '(every coordinator of the database is started with the same number; the first one stores it)',
  },
  boundedFlag('lease-ttl-millis', B.leaseTtlMs, {
    default: D.leaseTtlMs,
    help: 'PostgreSQL: the leader lease lasts this long after each renewal',
  }),
  boundedFlag('lease-renew-interval-millis', B.leaseRenewIntervalMs, {
    default: D.leaseRenewIntervalMs,
    help: 'PostgreSQL: the leader renews, and a standby tries to take over, this often (at most half the ttl)',
  }),
  boundedFlag('heartbeat-timeout-millis', B.heartbeatTimeoutMs, {
    default: D.heartbeatTimeoutMs,
    help: 'a worker silent this long is lost',
  }),
  boundedFlag('sweep-interval-millis', B.sweepIntervalMs, {
    default: D.sweepIntervalMs,
    help: 'period of the liveness/deadline/retry sweep',
  }),
  boundedFlag('task-timeout-millis', B.taskTimeoutMs, {
    default: D.taskTimeoutMs,
    help: 'execution deadline of one attempt',
  }),
  boundedFlag('max-attempts', B.maxAttempts, {
    default: D.maxAttempts,
    help: 'attempts per job unless the submission says otherwise',
  }),
  boundedFlag('retry-base-delay-millis', B.retryBaseDelayMs, {
    default: D.retryBaseDelayMs,
    help: 'retry back-off: delay after attempt 1',
  }),
  boundedFlag('retry-max-delay-millis', B.retryMaxDelayMs, {
    default: D.retryMaxDelayMs,
    help: 'retry back-off: longest delay',
  }),
  boundedFlag('max-active-jobs', B.maxActiveJobs, {
    default: D.maxActiveJobs,
    help: 'non-terminal jobs allowed; more submissions are rejected',
  }),
  boundedFlag('max-scheduled-jobs', B.maxScheduledJobs, {
    default: D.maxScheduledJobs,
    help: 'delayed (SCHEDULED) jobs allowed; they count as active only once due',
  }),
  boundedFlag('aging-step-millis', B.agingStepMs, {
    default: D.agingStepMs,
    help: 'a queued job gains one priority level per this much age',
  }),
  {
    name: 'durability',
    type: 'enum',
    values: DURABILITIES,
    default: D.durability,
    help: 'normal: survives a crash; full: fsync per commit',
  },
  ...LOG_FLAGS,
  boundedFlag('http-port', B.metricsPort, {
    defaultLabel: 'off',
    help: 'HTTP port: the dashboard at /, its API under /api/, /metrics and /healthz',
  }),
  boundedFlag('metrics-port', B.metricsPort, {
    defaultLabel: 'off',
    help: 'the same as --http-port (older name)',
  }),
  ...HTTP_HOST_FLAGS,
  ...COORDINATOR_SECURITY_FLAGS,
  ...LIMIT_FLAGS,
  boundedFlag('retain-terminal-millis', B.retainTerminalMs, {
    defaultLabel: 'off: kept forever',
    help: 'delete terminal jobs (and their attempts) older than this, in the background',
  }),
  ...CLIENT_BUDGET_FLAGS,
];

/** `--http-port`, or its older name `--metrics-port`; both at once must agree. */
function httpPortOf(values: FlagValues): number | null {
  const http = values.optionalInt('http-port');
  const metrics = values.optionalInt('metrics-port');
  if (http !== undefined && metrics !== undefined && http !== metrics) {
    throw new UsageError(
      `--http-port ${http} and --metrics-port ${metrics} name the same port; give one`,
    );
  }
  return http ?? metrics ?? null;
}

/** `--database`, or the first line of `--database-file` when given. */
function databaseOf(values: FlagValues): string {
  const file = values.optionalString('database-file');
  if (file === undefined) return values.string('database');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`--database-file ${file}: ${describeError(err)}`);
  }
  const first = text.split('\n')[0]?.trim() ?? '';
  if (first === '') throw new UsageError(`--database-file ${file} is empty`);
  return first;
}

/** The flag of each option a relation between options names (a refusal names the flags). */
const FLAG_OF: Partial<Record<keyof CoordinatorOptions, string>> = {
  leaseTtlMs: 'lease-ttl-millis',
  leaseRenewIntervalMs: 'lease-renew-interval-millis',
  retryBaseDelayMs: 'retry-base-delay-millis',
  retryMaxDelayMs: 'retry-max-delay-millis',
};

function buildOptions(values: FlagValues): CoordinatorOptions {
  const databasePath = databaseOf(values);
  const options: Omit<CoordinatorOptions, 'logger'> = {
    workerPort: values.int('worker-port'),
    clientPort: values.int('client-port'),
    bindHost: values.string('bind-host'),
    databasePath,
    advertiseHost: values.optionalString('advertise-host') ?? null,
    leaseTtlMs: values.int('lease-ttl-millis'),
    leaseRenewIntervalMs: values.int('lease-renew-interval-millis'),
    heartbeatTimeoutMs: values.int('heartbeat-timeout-millis'),
    sweepIntervalMs: values.int('sweep-interval-millis'),
    taskTimeoutMs: values.int('task-timeout-millis'),
    maxAttempts: values.int('max-attempts'),
    retryBaseDelayMs: values.int('retry-base-delay-millis'),
    retryMaxDelayMs: values.int('retry-max-delay-millis'),
    maxActiveJobs: values.int('max-active-jobs'),
    maxScheduledJobs: values.int('max-scheduled-jobs'),
    agingStepMs: values.int('aging-step-millis'),
    durability: values.enum('durability', DURABILITIES),
    metricsPort: httpPortOf(values),
    httpAllowedHosts: httpAllowedHostsFrom(values),
    security: securityOptionsFrom(values),
    netLimits: netLimitsFrom(values),
    retainTerminalMs: values.optionalInt('retain-terminal-millis') ?? null,
    ...clientBudgetsFrom(values),
  };
  const problem = relationProblem(
    options,
    COORDINATOR_RELATIONS,
    (key) => `--${FLAG_OF[key] ?? key}`,
  );
  if (problem !== null) throw new UsageError(problem);
  return { ...options, logger: loggerFrom(values, 'coordinator') };
}

const values = parseServerFlags(process.argv.slice(2), PROGRAM, SUMMARY, FLAGS);
let options: CoordinatorOptions;
try {
  options = buildOptions(values);
} catch (err) {
  if (!(err instanceof UsageError)) throw err;
  process.stderr.write(`${PROGRAM}: ${err.message}\nRun \`${PROGRAM} --help\` for usage.\n`);
  process.exit(2);
}
const shards = values.int('shards');
const shardsProblem =
  shards === 1
    ? null
    : !isSharedDatabase(options.databasePath)
      ? `--shards ${shards} needs a PostgreSQL --database (postgres://…)`
      : null;
if (shardsProblem !== null) {
  process.stderr.write(`${PROGRAM}: ${shardsProblem}\nRun \`${PROGRAM} --help\` for usage.\n`);
  process.exit(2);
}
const starting: Promise<{ close(): Promise<void>; reload?(): void }> =
  shards > 1
    ? ShardedCoordinator.start(options, shards, { httpPort: startHttpPort })
    : Coordinator.start(options, { httpPort: startHttpPort });
// Handlers go in before start-up finishes, so an early SIGTERM still stops cleanly.
stopOnSignals(options.logger, async () => (await starting).close());
// SIGHUP: re-read the TLS certificate and the token files.
process.on('SIGHUP', () => {
  options.logger.info('SIGHUP: reloading certificates and tokens');
  void starting.then(
    (coordinator) => coordinator.reload?.(),
    () => undefined,
  );
});
try {
  await starting;
} catch (err) {
  if (err instanceof DtpError && err.code === LocalErrorCode.ShardsMismatch) {
    // The command line disagrees with the database: a usage error, not a failure to start.
    process.stderr.write(`${PROGRAM}: ${err.message}\n`);
    process.exit(2);
  }
  exitOnStartFailure(PROGRAM, err);
}
