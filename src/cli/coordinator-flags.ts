/**
 * The coordinator's flags for TLS, tokens and the bounds on connections and
 * memory (guard.ts), and how they become options.
 */
import {
  DEFAULT_NET_LIMITS,
  NET_LIMIT_BOUNDS,
  type NetLimits,
  type SecurityOptions,
} from '../coordinator/ports/guard.js';
import { allowedHostEntry } from '../http/host-check.js';
import {
  COORDINATOR_BOUNDS,
  DEFAULT_COORDINATOR_OPTIONS,
  type CoordinatorOptions,
} from '../coordinator/options.js';
import { UsageError, boundedFlag, splitList } from './flags.js';
import type { FlagSpec, FlagValues } from './flags.js';

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
    name: 'peer-tls-ca',
    type: 'string',
    placeholder: 'pem',
    defaultLabel: '--tls-cert itself',
    help: "sharded, with TLS: the CA that signed the other coordinators' certificates (the client port forwards to them)",
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
  const peerCaFile = values.optionalString('peer-tls-ca') ?? null;
  if (peerCaFile !== null && certFile === undefined) {
    throw new UsageError('--peer-tls-ca needs --tls-cert and --tls-key');
  }
  return {
    tls:
      certFile !== undefined && keyFile !== undefined ? { certFile, keyFile, clientCaFile } : null,
    clientTokenFile: values.optionalString('client-token-file') ?? null,
    workerTokenFile: values.optionalString('worker-token-file') ?? null,
    ...(peerCaFile !== null && { peerCaFile }),
  };
}

const L = DEFAULT_NET_LIMITS;

/** A coordinator's bounds on connections and memory. */
export const LIMIT_FLAGS: readonly FlagSpec[] = [
  boundedFlag('max-connections', NET_LIMIT_BOUNDS.maxConnections, {
    default: L.maxConnections,
    help: 'open connections per port (worker port and client port each)',
  }),
  boundedFlag('max-connections-per-address', NET_LIMIT_BOUNDS.maxConnectionsPerAddress, {
    default: L.maxConnectionsPerAddress,
    help: 'open connections per port from one remote address',
  }),
  boundedFlag('max-pending-connections', NET_LIMIT_BOUNDS.maxPendingConnections, {
    default: L.maxPendingConnections,
    help: 'connections per port still in TLS, AUTH or registration (the rest is kept for others)',
  }),
  boundedFlag('handshake-timeout-millis', NET_LIMIT_BOUNDS.handshakeTimeoutMs, {
    defaultLabel: 'the heartbeat timeout, at least 1000',
    help: 'absolute time to finish TLS and AUTH / WORKER_REGISTER after connecting',
  }),
  boundedFlag('frame-timeout-millis', NET_LIMIT_BOUNDS.frameTimeoutMs, {
    default: L.frameTimeoutMs,
    help: 'time a peer has to finish a frame it started',
  }),
  boundedFlag('client-idle-timeout-millis', NET_LIMIT_BOUNDS.clientIdleTimeoutMs, {
    default: L.clientIdleTimeoutMs,
    help: 'close a client connection with nothing in flight after this much silence; 0 = never',
  }),
  boundedFlag('max-inbound-bytes', NET_LIMIT_BOUNDS.maxInboundBytes, {
    default: L.maxInboundBytes,
    help: 'bytes all connections together may hold in partly received frames',
  }),
  boundedFlag('max-unsent-reply-bytes', NET_LIMIT_BOUNDS.maxUnsentReplyBytes, {
    default: L.maxUnsentReplyBytes,
    help: "a client's unsent replies beyond which its requests are not read until it catches up",
  }),
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

const B = COORDINATOR_BOUNDS;

/**
 * The caps on pending WAIT_JOB requests, on subscriptions and live streams
 * per address, and when a subscriber counts as stalled (bounds from
 * options.ts, shared with startCoordinator).
 */
export const CLIENT_BUDGET_FLAGS: readonly FlagSpec[] = [
  boundedFlag('max-waits-per-connection', B.maxWaitsPerConnection, {
    default: DEFAULT_COORDINATOR_OPTIONS.maxWaitsPerConnection,
    help: 'pending WAIT_JOB requests one client connection may hold; more get ERROR TOO_MANY_WAITS',
  }),
  boundedFlag('max-waits-per-address', B.maxWaitsPerAddress, {
    default: DEFAULT_COORDINATOR_OPTIONS.maxWaitsPerAddress,
    help: 'pending WAIT_JOB requests the client connections of one address may hold together; more get ERROR TOO_MANY_WAITS',
  }),
  boundedFlag('max-waits', B.maxWaits, {
    default: DEFAULT_COORDINATOR_OPTIONS.maxWaits,
    help: 'pending WAIT_JOB requests all client connections together may hold; more get ERROR TOO_MANY_WAITS',
  }),
  boundedFlag('max-subscriptions-per-address', B.maxSubscriptionsPerAddress, {
    default: DEFAULT_COORDINATOR_OPTIONS.maxSubscriptionsPerAddress,
    help: 'job-event subscriptions (watch, events) the client connections of one address may hold together, of 1024 in all',
  }),
  boundedFlag('max-http-streams-per-address', B.maxHttpStreamsPerAddress, {
    default: DEFAULT_COORDINATOR_OPTIONS.maxHttpStreamsPerAddress,
    help: 'live streams of the HTTP port (/api/events) one address may hold, of 32 in all',
  }),
  boundedFlag('subscriber-stall-millis', B.subscriberStallMs, {
    default: DEFAULT_COORDINATOR_OPTIONS.subscriberStallMs,
    help: 'a subscriber or live stream that left what was sent to it unread this long is dropped for a newcomer when a budget is full',
  }),
];

export function clientBudgetsFrom(
  values: FlagValues,
): Pick<
  CoordinatorOptions,
  | 'maxWaitsPerConnection'
  | 'maxWaitsPerAddress'
  | 'maxWaits'
  | 'maxSubscriptionsPerAddress'
  | 'maxHttpStreamsPerAddress'
  | 'subscriberStallMs'
> {
  return {
    maxWaitsPerConnection: values.int('max-waits-per-connection'),
    maxWaitsPerAddress: values.int('max-waits-per-address'),
    maxWaits: values.int('max-waits'),
    maxSubscriptionsPerAddress: values.int('max-subscriptions-per-address'),
    maxHttpStreamsPerAddress: values.int('max-http-streams-per-address'),
    subscriberStallMs: values.int('subscriber-stall-millis'),
  };
}
