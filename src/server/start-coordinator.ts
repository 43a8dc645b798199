/**
 * Running a coordinator from code: `startCoordinator(options)` fills in the
 * documented defaults (docs/OPERATIONS.md), checks every option, and starts a {@link Coordinator}
 * (store opened and recovered, both ports listening) with its HTTP port
 * (src/http/) when `metricsPort` is set. This is where the two are put
 * together: the coordinator never imports the HTTP side.
 *
 *     import { startCoordinator } from 'dtp/coordinator';
 *     const coordinator = await startCoordinator({ databasePath: 'jobs.db' });
 *     console.log(coordinator.workerPort, coordinator.clientPort);
 *     ...
 *     await coordinator.close();
 */
import { Coordinator, type CoordinatorDeps } from '../coordinator/coordinator.js';
import {
  DEFAULT_COORDINATOR_OPTIONS,
  coordinatorOptionsProblem,
  type CoordinatorOptions,
} from '../coordinator/options.js';
import { startHttpPort } from '../http/http-server.js';
import { createLogger, type Logger } from '../observability/logger.js';
import { LocalErrorCode } from '../protocol/error-codes.js';
import { DtpError } from '../protocol/errors.js';

/** What {@link startCoordinator} accepts: every coordinator option, each with a default. */
export type StartCoordinatorOptions = Partial<Omit<CoordinatorOptions, 'logger'>> & {
  /** Default: human-readable lines on stdout at level info, named `coordinator`. */
  logger?: Logger;
};

function invalid(message: string): DtpError {
  return new DtpError(LocalErrorCode.InvalidOptions, `startCoordinator: ${message}`);
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
  const problem = coordinatorOptionsProblem(full);
  if (problem !== null) throw invalid(problem);
  return Coordinator.start(full, { httpPort: startHttpPort, ...deps });
}
