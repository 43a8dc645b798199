/**
 * The coordinator's HTTP port for operators (`--http-port`, alias
 * `--metrics-port`), started by the coordinator through
 * {@link startHttpPort} (its `HttpPortFactory`; the HTTP side sees the
 * coordinator through coordinator/view.ts only):
 *
 * - `GET /metrics`: Prometheus text format, the coordinator's own metrics;
 * - `GET /healthz`: 200 while the coordinator serves, 503 while it stands by
 *   or once it has stopped working, with a JSON body (health.ts);
 * - another method on those paths: 405;
 * - the dashboard (`/`, `/assets/*`) and its JSON API (`/api/*`, sessions
 *   included), handed to {@link Dashboard} (src/http/); any other path: 404.
 *
 * With a certificate it speaks HTTPS (the coordinator's certificate, reloaded
 * with it). With client tokens, `/metrics` and `/api/*` need a token (bearer
 * or session cookie, {@link HttpAuth}); `/healthz` and the page shell never
 * do (they reveal no job data).
 *
 * Before any of that, a request must be readable (a request target that is
 * no URL is a 400: src/http/request-target.ts) and, except for `/healthz`,
 * name this coordinator in its Host and not act from another origin (403:
 * src/http/host-check.ts). Nothing a peer sends is thrown out of a handler.
 *
 * Connections are bounded in number, per address and in time
 * ({@link HTTP_LIMITS}, src/http/connection-gate.ts): a whole request header
 * within `headersTimeoutMs`, a whole request within `requestTimeoutMs`, and
 * a full port or address makes room by closing its oldest idle connection.
 */
import {
  createServer,
  type IncomingMessage,
  type Server,
  type ServerOptions,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type {
  CoordinatorView,
  HttpLimits,
  HttpPort,
  HttpPortFactory,
  HttpPortSettings,
  MetricsText,
} from '../coordinator/view.js';
import type { NetEvent } from '../net/net-events.js';
import { describeTlsError } from '../net/tls.js';
import { describeError } from '../protocol/errors.js';
import { HttpConnectionGate } from './connection-gate.js';
import { Dashboard } from './dashboard.js';
import { DEFAULT_LIVE_LIMITS } from './live.js';
import { healthOf } from './health.js';
import { HostPolicy } from './host-check.js';
import { HttpAuth } from './http-auth.js';
import { parseRequestTarget, type RequestTarget } from './request-target.js';
import { sendError } from './responses.js';

export type { HttpLimits };

export const HTTP_LIMITS: HttpLimits = {
  maxConnections: 256,
  maxConnectionsPerAddress: 64,
  headersTimeoutMs: 5_000,
  requestTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
  maxStreamsPerAddress: DEFAULT_LIVE_LIMITS.maxStreamsPerAddress,
  streamStallMs: DEFAULT_LIVE_LIMITS.stallMs,
};

/** Node checks the two timeouts this often: a quarter of the shorter, at most 1 s. */
function checkingIntervalMs(limits: HttpLimits): number {
  const shorter = Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs);
  return Math.max(10, Math.min(1_000, Math.floor(shorter / 4)));
}

/** Starts the HTTP port of `view` (the coordinator's {@link HttpPortFactory}). */
export const startHttpPort: HttpPortFactory = (view, settings) => HttpServer.start(view, settings);

export class HttpServer implements HttpPort {
  readonly #server: Server;
  readonly #view: CoordinatorView;
  readonly #metrics: MetricsText;
  readonly #dashboard: Dashboard;
  readonly #hosts: HostPolicy;
  readonly #gate: HttpConnectionGate;
  #stopReloads: (() => void) | null = null;
  #port = 0;
  #closing: Promise<void> | null = null;

  private constructor(view: CoordinatorView, settings: HttpPortSettings) {
    this.#view = view;
    this.#metrics = settings.metrics;
    const report = (event: NetEvent): void => settings.report(event);
    // Token and session checks, with the coordinator's client tokens.
    const auth = new HttpAuth(settings.tokens, {
      secureCookie: settings.tls !== null,
      onRefused: (remote, reason) => report({ type: 'auth.refused', port: 'http', remote, reason }),
    });
    const limits = { ...HTTP_LIMITS, ...settings.limits };
    this.#dashboard = new Dashboard(view, {
      maxActiveJobs: settings.maxActiveJobs,
      auth,
      cron: settings.cron,
      live: { maxStreamsPerAddress: limits.maxStreamsPerAddress, stallMs: limits.streamStallMs },
      ...(settings.uiDir !== undefined && { uiDir: settings.uiDir }),
    });
    this.#hosts = new HostPolicy({
      allowedHosts: settings.allowedHosts,
      ownNames: settings.ownNames,
    });
    this.#gate = new HttpConnectionGate(
      { maxConnections: limits.maxConnections, maxPerAddress: limits.maxConnectionsPerAddress },
      report,
    );
    this.#server = this.#createServer(settings, limits);
    const tls = settings.tls !== null;
    this.#server.on('connection', (socket: Socket) => this.#gate.admit(socket, tls));
    // A server error after listening must not end the process (none is known
    // to come from a peer: libuv sheds accepts itself when out of descriptors).
    this.#server.on('error', () => undefined);
  }

  #createServer(settings: HttpPortSettings, limits: HttpLimits): Server {
    const handler = (req: IncomingMessage, res: ServerResponse): void => this.#handle(req, res);
    // In the constructor's options, not set afterwards: Node arms its checks
    // of the two timeouts there (set later, a stalled body was held 60-90 s).
    const http: ServerOptions = {
      // Node requires the header deadline within the request deadline.
      headersTimeout: Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs),
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      connectionsCheckingInterval: checkingIntervalMs(limits),
    };
    const tls = settings.tls;
    if (tls === null) return createServer(http, handler);
    const server = createHttpsServer(
      { ...tls.secureContextOptions, ...http, handshakeTimeout: limits.headersTimeoutMs },
      handler,
    );
    this.#stopReloads = tls.onReload((context) => server.setSecureContext(context));
    const report = (event: NetEvent): void => settings.report(event);
    const remoteOf = (socket: TLSSocket): string =>
      `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`;
    server.on('secureConnection', (socket: TLSSocket) => {
      this.#gate.attachTls(socket);
      report({ type: 'tls.handshake', port: 'http', remote: remoteOf(socket), ok: true });
    });
    server.on('tlsClientError', (err: Error, socket: TLSSocket) => {
      const error = describeTlsError(err);
      report({ type: 'tls.handshake', port: 'http', remote: remoteOf(socket), ok: false, error });
    });
    return server;
  }

  /** Listens; rejects if the port cannot be bound. */
  static async start(view: CoordinatorView, settings: HttpPortSettings): Promise<HttpServer> {
    const self = new HttpServer(view, settings);
    await new Promise<void>((resolve, reject) => {
      self.#server.once('error', reject);
      self.#server.listen(settings.port, settings.host, () => {
        self.#server.off('error', reject);
        self.#port = (self.#server.address() as AddressInfo).port;
        resolve();
      });
    });
    return self;
  }

  /** The port actually bound. */
  get port(): number {
    return this.#port;
  }

  /** Open connections right now. */
  get connectionCount(): number {
    return this.#gate.openCount;
  }

  /** Every request; nothing it throws leaves (a 500, or a close once answering). */
  #handle(req: IncomingMessage, res: ServerResponse): void {
    res.once('close', this.#gate.requestStarted(req.socket));
    try {
      const target = parseRequestTarget(req.url);
      if (target === null) {
        res.setHeader('Connection', 'close');
        reply(res, 400, 'bad request target\n');
        return;
      }
      if (target.path !== '/healthz' && this.#refused(target, req, res)) return;
      this.#route(target, req, res);
    } catch (err) {
      failed(res, err);
    }
  }

  /** Answers 403 and returns true when the Host or the Origin is not this coordinator's. */
  #refused(target: RequestTarget, req: IncomingMessage, res: ServerResponse): boolean {
    const host = target.authority ?? req.headers.host;
    const refusal = this.#hosts.refusal(req, host);
    if (refusal === null) return false;
    sendError(res, refusal);
    return true;
  }

  #route(target: RequestTarget, req: IncomingMessage, res: ServerResponse): void {
    const path = target.path;
    if (path !== '/metrics' && path !== '/healthz') {
      if (!this.#dashboard.handle(target, req, res)) reply(res, 404, 'not found\n');
    } else if (req.method !== 'GET') {
      res.setHeader('Allow', 'GET');
      reply(res, 405, 'method not allowed\n');
    } else if (path === '/healthz') {
      const health = healthOf(this.#view);
      reply(res, health.statusCode, `${JSON.stringify(health.body)}\n`, 'application/json');
    } else if (!this.#dashboard.authorizes(req)) {
      res.setHeader('WWW-Authenticate', 'Bearer realm="dtp"');
      reply(
        res,
        401,
        'Unauthenticated: send Authorization: Bearer <token>, or POST it to /api/session\n',
      );
    } else {
      this.#metrics
        .text()
        .then((text) => reply(res, 200, text, this.#metrics.contentType))
        .catch((err: unknown) => failed(res, err));
    }
  }

  /** Stops listening and ends open connections (scrapers keep them alive). Idempotent. */
  close(): Promise<void> {
    this.#stopReloads?.();
    this.#closing ??= new Promise<void>((resolve) => {
      this.#dashboard.close();
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
    return this.#closing;
  }
}

/** Answers 500, or closes the connection once an answer has started or cannot be written. */
function failed(res: ServerResponse, err: unknown): void {
  try {
    if (!res.headersSent) return reply(res, 500, `internal error: ${describeError(err)}\n`);
  } catch {
    // fall through: the connection goes
  }
  res.destroy();
}

function reply(
  res: ServerResponse,
  status: number,
  body: string,
  contentType = 'text/plain; charset=utf-8',
): void {
  res.writeHead(status, {
    'Content-Type': contentType,
    'Content-Length': Buffer.byteLength(body),
  });
  res.end(body);
}
