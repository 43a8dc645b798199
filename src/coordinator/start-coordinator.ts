/**
 * Running a coordinator from code: `startCoordinator(options)` fills in the
 * documented defaults (docs/OPERATIONS.md), checks every option, and starts a {@link Coordinator}
 * (store opened and recovered, both ports listening).
 *
 *     import { startCoordinator } from 'dtp/coordinator';
 *     const coordinator = await startCoordinator({ databasePath: 'jobs.db' });
 *     console.log(coordinator.workerPort, coordinator.clientPort);
 *     ...
 *     await coordinator.close();
 */
import { createLogger, type Logger } from '../observability/logger.js';
import { DtpError } from '../protocol/errors.js';
import {
  MAX_ATTEMPTS_LIMIT,
  MAX_TASK_TIMEOUT_MS,
  MIN_TASK_TIMEOUT_MS,
} from '../protocol/limits.js';
import { Coordinator, type CoordinatorDeps } from './coordinator.js';
import {
  DEFAULT_COORDINATOR_OPTIONS,
  DURABILITIES,
  WAIT_CAP_RANGES,
  type CoordinatorOptions,
} from './options.js';

/** What {@link startCoordinator} accepts: every coordinator option, each with a default. */
export type StartCoordinatorOptions = Partial<Omit<CoordinatorOptions, 'logger'>> & {
  /** Default: human-readable lines on stdout at level info, named `coordinator`. */
  logger?: Logger;
};

const DAY_MS = 86_400_000;
const PORT = [0, 65_535] as const;

/** Inclusive bounds of the numeric options (ports: 0 = any free port). */
const INTEGER_RANGES = {
  workerPort: PORT,
  clientPort: PORT,
  heartbeatTimeoutMs: [1, DAY_MS],
  sweepIntervalMs: [1, DAY_MS],
  taskTimeoutMs: [MIN_TASK_TIMEOUT_MS, MAX_TASK_TIMEOUT_MS],
  maxAttempts: [1, MAX_ATTEMPTS_LIMIT],
  retryBaseDelayMs: [0, DAY_MS],
  retryMaxDelayMs: [0, DAY_MS],
  maxActiveJobs: [1, 100_000_000],
  agingStepMs: [1, 365 * DAY_MS],
  leaseTtlMs: [100, DAY_MS],
  leaseRenewIntervalMs: [10, DAY_MS],
  ...WAIT_CAP_RANGES,
} as const satisfies Partial<Record<keyof CoordinatorOptions, readonly [number, number]>>;

function invalid(message: string): DtpError {
  return new DtpError('INVALID_OPTIONS', `startCoordinator: ${message}`);
}

function describe(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

/** Throws a DtpError `INVALID_OPTIONS` naming the first bad option. */
export function validateCoordinatorOptions(options: CoordinatorOptions): void {
  for (const [key, [min, max]] of Object.entries(INTEGER_RANGES)) {
    const value: unknown = options[key as keyof typeof INTEGER_RANGES];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max)
      throw invalid(`${key} must be an integer in ${min}..${max}, got ${describe(value)}`);
  }
  for (const key of ['bindHost', 'databasePath'] as const) {
    const value: unknown = options[key];
    if (typeof value !== 'string' || value === '')
      throw invalid(`${key} must be a non-empty string, got ${describe(value)}`);
  }
  if (!DURABILITIES.includes(options.durability))
    throw invalid(
      `durability must be one of ${DURABILITIES.join(', ')}, got ${describe(options.durability)}`,
    );
  const metricsPort: unknown = options.metricsPort;
  if (
    metricsPort !== null &&
    (typeof metricsPort !== 'number' ||
      !Number.isInteger(metricsPort) ||
      metricsPort < 0 ||
      metricsPort > 65_535)
  )
    throw invalid(
      `metricsPort must be null (off) or an integer in 0..65535, got ${describe(metricsPort)}`,
    );
  if (options.leaseRenewIntervalMs * 2 > options.leaseTtlMs)
    throw invalid(
      `leaseRenewIntervalMs (${options.leaseRenewIntervalMs}) must be at most half of leaseTtlMs (${options.leaseTtlMs})`,
    );
  if (options.retryMaxDelayMs < options.retryBaseDelayMs)
    throw invalid('retryMaxDelayMs must be at least retryBaseDelayMs');
}

/**
 * Starts a coordinator with the documented defaults (docs/OPERATIONS.md) for every option left
 * out. Rejects with a DtpError `INVALID_OPTIONS` naming a bad option, or
 * with the reason it could not start (port in use, database unreadable).
 */
export async function startCoordinator(
  options: StartCoordinatorOptions = {},
  deps: CoordinatorDeps = {},
): Promise<Coordinator> {
  if (typeof options !== 'object' || options === null) throw invalid('options must be an object');
  const defined = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
  const full: CoordinatorOptions = {
    ...DEFAULT_COORDINATOR_OPTIONS,
    ...(defined as Partial<CoordinatorOptions>),
    logger: options.logger ?? createLogger({ name: 'coordinator' }),
  };
  validateCoordinatorOptions(full);
  return Coordinator.start(full, deps);
}
