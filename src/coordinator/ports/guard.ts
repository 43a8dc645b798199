/**
 * What stands between the network and the coordinator's core: TLS, tokens and
 * the bounds on connections and memory. The shell asks the guard how to set up
 * each server and connection; the guard reports every refusal and bound that
 * bites as a {@link NetEvent} (counted by the metrics, logged with a
 * throttle), and re-reads certificates and token files on `reload()`.
 *
 * Defaults are chosen so that heavy use from one host does not hit them (700
 * idle connections from one address, 20,000 pending waits over 16
 * connections); each can be changed with a flag.
 */
import { EventEmitter } from 'node:events';
import { MAX_TIMER_MS, type BoundsTable } from '../../common/bounds.js';
import { DAY_MS } from '../../protocol/duration.js';
import type { AdmissionLimits } from '../../net/admission.js';
import type { ConnectionOptions } from '../../net/framed-connection.js';
import { InboundBudget } from '../../net/inbound-budget.js';
import type { ConnectionLimit, NetEvent, PortName } from '../../net/net-events.js';
import type { TcpServerOptions } from '../../net/tcp.js';
import { ServerTls, type ServerTlsFiles } from '../../net/tls.js';
import { LogThrottle } from '../../observability/log-throttle.js';
import type { Logger } from '../../observability/logger.js';
import { describeError } from '../../protocol/errors.js';
import { AccessControl } from './access.js';

/** TLS and tokens; all off by default. */
export interface SecurityOptions {
  /** Certificate and key (and optionally a CA for client certificates): TLS on every port. */
  tls?: ServerTlsFiles | null;
  /** One token per line: clients must AUTH with one, the HTTP API needs one. */
  clientTokenFile?: string | null;
  /** One token per line: workers must register with one. */
  workerTokenFile?: string | null;
  /**
   * Sharded with TLS: the CA the client port trusts when it forwards to the
   * other coordinators' shard ports; absent = the certificate of `tls` itself.
   */
  peerCaFile?: string | null;
}

/** Bounds on connections and memory (see the module comment for the defaults). */
export interface NetLimits {
  /** Open connections per port (worker port and client port each). */
  maxConnections: number;
  /** Open connections per port from one remote address. */
  maxConnectionsPerAddress: number;
  /**
   * Connections per port still in the TLS handshake or not yet authenticated
   * / registered; the rest of `maxConnections` is kept for the others.
   */
  maxPendingConnections: number;
  /**
   * Absolute time from accept to done with TLS, AUTH (client port, with
   * tokens) or WORKER_REGISTER (worker port), in ms; null = the heartbeat
   * timeout, at least 1000.
   */
  handshakeTimeoutMs: number | null;
  /** Time a started frame has to arrive whole, in ms. */
  frameTimeoutMs: number;
  /** A client connection with nothing in flight is closed after this long without a request, in ms (0 = never). */
  clientIdleTimeoutMs: number;
  /** Bytes all connections together may hold in partly received frames. */
  maxInboundBytes: number;
  /** Unsent reply bytes of one client connection beyond which its requests are not read until it drains. */
  maxUnsentReplyBytes: number;
}

export const DEFAULT_NET_LIMITS: NetLimits = {
  maxConnections: 8_192,
  maxConnectionsPerAddress: 4_096,
  maxPendingConnections: 1_024,
  handshakeTimeoutMs: null,
  frameTimeoutMs: 30_000,
  clientIdleTimeoutMs: 600_000,
  maxInboundBytes: 256 * 1024 * 1024,
  maxUnsentReplyBytes: 1024 * 1024,
};

/** Bounds of every net limit (the coordinator's flags and options share them). */
export const NET_LIMIT_BOUNDS: BoundsTable<NetLimits> = {
  maxConnections: { min: 1, max: 1_000_000 },
  maxConnectionsPerAddress: { min: 1, max: 1_000_000 },
  maxPendingConnections: { min: 1, max: 1_000_000 },
  handshakeTimeoutMs: { min: 1, max: DAY_MS, nullMeans: 'the heartbeat timeout, at least 1000' },
  frameTimeoutMs: { min: 1, max: DAY_MS },
  clientIdleTimeoutMs: { min: 0, max: MAX_TIMER_MS },
  maxInboundBytes: { min: 1024 * 1024, max: Number.MAX_SAFE_INTEGER },
  maxUnsentReplyBytes: { min: 1024, max: Number.MAX_SAFE_INTEGER },
};

/** The handshake deadline when none is configured: the heartbeat timeout, at least 1 s. */
export function defaultHandshakeTimeoutMs(heartbeatTimeoutMs: number): number {
  return Math.max(heartbeatTimeoutMs, 1_000);
}

/** Bounds that pause a connection instead of closing it, as logged. */
const PAUSE_MESSAGES: Partial<Record<ConnectionLimit, string>> = {
  unsent_replies: 'connection paused: too many unsent replies',
  inbound_memory: 'connection paused: its next frame waits for room in the inbound budget',
};

export interface GuardEvents {
  net: [NetEvent];
}

/** Loopback and unspecified-loopback names; anything else is reachable from elsewhere. */
function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}

export class Guard {
  readonly events = new EventEmitter<GuardEvents>();
  readonly access: AccessControl;
  readonly tls: ServerTls | null;
  readonly limits: NetLimits & { handshakeTimeoutMs: number };
  readonly inboundBudget: InboundBudget;
  readonly #log: Logger;
  readonly #throttle: LogThrottle;

  /** Reads certificates and token files; throws a TlsConfigError or TokenFileError. */
  constructor(
    security: SecurityOptions,
    limits: Partial<NetLimits>,
    heartbeatTimeoutMs: number,
    log: Logger,
  ) {
    this.#log = log;
    this.#throttle = new LogThrottle(log);
    this.tls = security.tls == null ? null : ServerTls.load(security.tls);
    this.access = new AccessControl(security);
    const merged = { ...DEFAULT_NET_LIMITS, ...limits };
    this.limits = {
      ...merged,
      handshakeTimeoutMs:
        merged.handshakeTimeoutMs ?? defaultHandshakeTimeoutMs(heartbeatTimeoutMs),
    };
    this.inboundBudget = new InboundBudget(this.limits.maxInboundBytes);
  }

  /** How the TcpServer of a port is set up. */
  serverOptions(port: PortName): TcpServerOptions {
    const { maxConnections, maxConnectionsPerAddress, maxPendingConnections } = this.limits;
    const limits: AdmissionLimits = {
      maxConnections,
      maxConnectionsPerAddress,
      maxPending: maxPendingConnections,
      handshakeTimeoutMs: this.limits.handshakeTimeoutMs,
    };
    return { name: port, limits, tls: this.tls, onEvent: (event) => this.report(event) };
  }

  /**
   * How each FramedConnection of a port is set up: it starts in the budget's
   * `pending` class (small frames only) until its owner says it got through.
   */
  connectionOptions(port: 'worker' | 'client'): ConnectionOptions {
    return {
      frameTimeoutMs: this.limits.frameTimeoutMs,
      inbound: {
        budget: this.inboundBudget,
        inboundClass: 'pending',
        onWait: (remote) =>
          this.report({ type: 'connection.limited', port, limit: 'inbound_memory', remote }),
      },
    };
  }

  /** Counts and logs one event (the log is thinned during floods). */
  report(event: NetEvent): void {
    this.events.emit('net', event);
    switch (event.type) {
      case 'connection.refused':
        this.#throttle.warn(
          `refused:${event.port}:${event.limit}`,
          { port: event.port, limit: event.limit, remote: event.remote },
          'connection refused: limit reached',
        );
        return;
      case 'connection.limited':
        this.#throttle.warn(
          `limited:${event.port}:${event.limit}`,
          { port: event.port, limit: event.limit, remote: event.remote },
          PAUSE_MESSAGES[event.limit] ?? 'connection closed: limit reached',
        );
        return;
      case 'tls.handshake':
        if (!event.ok) {
          this.#throttle.warn(
            `tls:${event.port}`,
            { port: event.port, remote: event.remote, error: event.error },
            'TLS handshake failed',
          );
        }
        return;
      case 'auth.refused':
        this.#throttle.warn(
          `auth:${event.port}`,
          { port: event.port, remote: event.remote, reason: event.reason },
          'authentication refused',
        );
        return;
      case 'events.dropped':
        this.#throttle.warn(
          `events:${event.port}`,
          { port: event.port, remote: event.remote, count: event.count },
          'subscriber fell behind: job events dropped (it was told how many)',
        );
        return;
    }
  }

  /** Warnings worth a line at start: an open port without tokens, readable token files. */
  warnAtStart(bindHost: string): void {
    const open = !isLoopback(bindHost);
    if (open && (!this.access.clientTokensRequired || !this.access.workerTokensRequired)) {
      const without = [
        this.access.clientTokensRequired ? null : 'clients',
        this.access.workerTokensRequired ? null : 'workers',
      ].filter((x) => x !== null);
      this.#log.warn(
        { bindHost, unauthenticated: without.join(',') },
        'listening on a non-loopback address without tokens: anyone who can reach the ports ' +
          'can use them (see docs/SECURITY.md)',
      );
    }
    for (const file of [this.access.client, this.access.worker]) {
      if (file?.readableByOthers === true) {
        this.#log.warn({ file: file.path }, 'token file is readable by other users');
      }
    }
  }

  /** What is on, for the start-up line. */
  describe(): Record<string, unknown> {
    return {
      tls: this.tls === null ? 'off' : this.tls.requiresClientCertificate ? 'mutual' : 'on',
      clientTokens: this.access.client?.count ?? 0,
      workerTokens: this.access.worker?.count ?? 0,
    };
  }

  /** Re-reads certificates and token files (SIGHUP); problems are logged, old material kept. */
  reload(): void {
    const problems = this.access.reload();
    if (this.tls !== null) {
      try {
        this.tls.reload();
      } catch (err) {
        problems.push(describeError(err));
      }
    }
    for (const problem of problems) this.#log.error({ problem }, 'reload failed; kept the old one');
    this.#log.info(
      { ...this.describe(), problems: problems.length },
      'certificates and tokens reloaded',
    );
  }
}
