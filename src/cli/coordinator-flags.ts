/**
 * The coordinator's flags for TLS, tokens and the bounds on connections and
 * memory (guard.ts), and how they become options.
 */
import { DEFAULT_NET_LIMITS, type NetLimits, type SecurityOptions } from '../coordinator/guard.js';
import { allowedHostEntry } from '../http/host-check.js';
import {
  DEFAULT_COORDINATOR_OPTIONS,
  WAIT_CAP_RANGES,
  type CoordinatorOptions,
} from '../coordinator/options.js';
import { UsageError, splitList } from './flags.js';
import type { FlagSpec, FlagValues } from './flags.js';

const INT32_MAX = 2_147_483_647;
const DAY_MS = 86_400_000;

/** A coordinator's TLS and token flags. */
export const COORDINATOR_SECURITY_FLAGS: readonly FlagSpec[] = [
  {
    name: 'tls-cert',
    type: 'string',
    placeholder: 'pem',
    defaultLabel: 'off',
    help: 'certificate: TLS on the worker, client and HTTP ports (with --tls-key); re-read on SIGHUP',
  },
  { name: 'tls-key', type: 'string', placeholder: 'pem', help: 'key of --tls-cert' },
  {
    name: 'tls-client-ca',
    type: 'string',
    placeholder: 'pem',
    defaultLabel: 'off',
    help: 'require client certificates signed by this CA (workers and clients)',
  },
  {
    name: 'client-token-file',
    type: 'string',
    placeholder: 'file',
    defaultLabel: 'off',
    help: 'tokens (one per line) clients must AUTH with; also guards the HTTP API; re-read on SIGHUP',
  },
  {
    name: 'worker-token-file',
    type: 'string',
    placeholder: 'file',
    defaultLabel: 'off',
    help: 'tokens (one per line) workers must register with; re-read on SIGHUP',
  },
];

export function securityOptionsFrom(values: FlagValues): SecurityOptions {
  const certFile = values.optionalString('tls-cert');
  const keyFile = values.optionalString('tls-key');
  const clientCaFile = values.optionalString('tls-client-ca') ?? null;
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new UsageError('--tls-cert and --tls-key go together');
  }
  if (clientCaFile !== null && certFile === undefined) {
    throw new UsageError('--tls-client-ca needs --tls-cert and --tls-key');
  }
  return {
    tls:
      certFile !== undefined && keyFile !== undefined ? { certFile, keyFile, clientCaFile } : null,
    clientTokenFile: values.optionalString('client-token-file') ?? null,
    workerTokenFile: values.optionalString('worker-token-file') ?? null,
  };
}

const L = DEFAULT_NET_LIMITS;

/** A coordinator's bounds on connections and memory. */
export const LIMIT_FLAGS: readonly FlagSpec[] = [
  {
    name: 'max-connections',
    type: 'int',
    min: 1,
    max: 1_000_000,
    default: L.maxConnections,
    help: 'open connections per port (worker port and client port each)',
  },
  {
    name: 'max-connections-per-address',
    type: 'int',
    min: 1,
    max: 1_000_000,
    default: L.maxConnectionsPerAddress,
    help: 'open connections per port from one remote address',
  },
  {
    name: 'max-pending-connections',
    type: 'int',
    min: 1,
    max: 1_000_000,
    default: L.maxPendingConnections,
    help: 'connections per port still in TLS, AUTH or registration (the rest is kept for others)',
  },
  {
    name: 'handshake-timeout-millis',
    type: 'int',
    min: 1,
    max: DAY_MS,
    defaultLabel: 'the heartbeat timeout, at least 1000',
    help: 'absolute time to finish TLS and AUTH / WORKER_REGISTER after connecting',
  },
  {
    name: 'frame-timeout-millis',
    type: 'int',
    min: 1,
    max: DAY_MS,
    default: L.frameTimeoutMs,
    help: 'time a peer has to finish a frame it started',
  },
  {
    name: 'client-idle-timeout-millis',
    type: 'int',
    min: 0,
    max: INT32_MAX,
    default: L.clientIdleTimeoutMs,
    help: 'close a client connection with nothing in flight after this much silence; 0 = never',
  },
  {
    name: 'max-inbound-bytes',
    type: 'int',
    min: 1_048_576,
    max: Number.MAX_SAFE_INTEGER,
    default: L.maxInboundBytes,
    help: 'bytes all connections together may hold in partly received frames',
  },
  {
    name: 'max-unsent-reply-bytes',
    type: 'int',
    min: 1_024,
    max: Number.MAX_SAFE_INTEGER,
    default: L.maxUnsentReplyBytes,
    help: "a client's unsent replies beyond which its requests are not read until it catches up",
  },
];

export function netLimitsFrom(values: FlagValues): NetLimits {
  return {
    maxConnections: values.int('max-connections'),
    maxConnectionsPerAddress: values.int('max-connections-per-address'),
    maxPendingConnections: values.int('max-pending-connections'),
    handshakeTimeoutMs: values.optionalInt('handshake-timeout-millis') ?? null,
    frameTimeoutMs: values.int('frame-timeout-millis'),
    clientIdleTimeoutMs: values.int('client-idle-timeout-millis'),
    maxInboundBytes: values.int('max-inbound-bytes'),
    maxUnsentReplyBytes: values.int('max-unsent-reply-bytes'),
  };
}

/** Which Host names the HTTP port answers beside its own (src/http/host-check.ts). */
export const HTTP_HOST_FLAGS: readonly FlagSpec[] = [
  {
    name: 'http-allowed-hosts',
    type: 'list',
    placeholder: 'names',
    help:
      'HTTP port: Host names to answer beside localhost, IP literals, --bind-host and ' +
      '--advertise-host; a,b (.domain = it and its subdomains, * = any)',
  },
];

export function httpAllowedHostsFrom(values: FlagValues): string[] {
  return values.strings('http-allowed-hosts').flatMap((given) =>
    splitList(given).map((entry) => {
      const normalised = allowedHostEntry(entry);
      if (normalised !== null) return normalised;
      throw new UsageError(
        `--http-allowed-hosts: ${JSON.stringify(entry)} is not a host name (give name, .domain or *, without a port)`,
      );
    }),
  );
}

const W = WAIT_CAP_RANGES;

/** The caps on pending WAIT_JOB requests (bounds from options.ts, shared with startCoordinator). */
export const WAIT_FLAGS: readonly FlagSpec[] = [
  {
    name: 'max-waits-per-connection',
    type: 'int',
    min: W.maxWaitsPerConnection[0],
    max: W.maxWaitsPerConnection[1],
    default: DEFAULT_COORDINATOR_OPTIONS.maxWaitsPerConnection,
    help: 'pending WAIT_JOB requests one client connection may hold; more get ERROR TOO_MANY_WAITS',
  },
  {
    name: 'max-waits',
    type: 'int',
    min: W.maxWaits[0],
    max: W.maxWaits[1],
    default: DEFAULT_COORDINATOR_OPTIONS.maxWaits,
    help: 'pending WAIT_JOB requests all client connections together may hold; more get ERROR TOO_MANY_WAITS',
  },
];

export function waitCapsFrom(
  values: FlagValues,
): Pick<CoordinatorOptions, 'maxWaitsPerConnection' | 'maxWaits'> {
  return {
    maxWaitsPerConnection: values.int('max-waits-per-connection'),
    maxWaits: values.int('max-waits'),
  };
}
