// The declarations speak Node.js's own types (AbortSignal, Buffer, TLS
// options); the package depends on @types/node, and this directive, kept in
// the emitted .d.ts, brings it in for users whatever their `types` setting.
/// <reference types="node" preserve="true" />
/**
 * `dtp/coordinator`: running a coordinator from code. Loads the SQLite store
 * (better-sqlite3); a client-only program imports `dtp` instead.
 */
export { Coordinator } from './coordinator.js';
export type { CoordinatorDeps, CoordinatorEvents } from './coordinator.js';
export {
  DEFAULT_COORDINATOR_OPTIONS,
  DURABILITIES,
  validateCoordinatorOptions,
} from './options.js';
export type { CoordinatorOptions, Durability } from './options.js';
export { startCoordinator } from '../server/start-coordinator.js';
export type { StartCoordinatorOptions } from '../server/start-coordinator.js';
export { COORDINATOR_FEATURES } from './core/offered-features.js';
export type { CoreEvent } from './core/types.js';
export { DtpError } from '../protocol/errors.js';
