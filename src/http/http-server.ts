/**
 * The coordinator's HTTP port for operators (`--http-port`, alias
 * `--metrics-port`), started by the coordinator through
 * {@link startHttpPort} (its `HttpPortFactory`):
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
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type {
  CoordinatorView,
  HttpPort,
  HttpPortFactory,
  HttpPortSettings,
  MetricsText,
} from '../coordinator/view.js';
import type { NetEvent } from '../net/net-events.js';
import { describeTlsError } from '../net/tls.js';
import { describeError } from '../protocol/errors.js';
import { Dashboard } from './dashboard.js';
import { healthOf } from './health.js';
import { HttpAuth } from './http-auth.js';

/** Scrapers, probes and a few open dashboards (each holds a live stream); more are refused. */
const MAX_CONNECTIONS = 128;
/** A request that has not arrived whole by then is dropped. */
const REQUEST_TIMEOUT_MS = 10_000;

/** Starts the HTTP port of `view` (the coordinator's {@link HttpPortFactory}). */
export const startHttpPort: HttpPortFactory = (view, settings) => HttpServer.start(view, settings);

export class HttpServer implements HttpPort {
  readonly #server: Server;
  readonly #view: CoordinatorView;
  readonly #metrics: MetricsText;
  readonly #dashboard: Dashboard;
  #stopReloads: (() => void) | null = null;
  #port = 0;
  #closing: Promise<void> | null = null;

  private constructor(view: CoordinatorView, settings: HttpPortSettings) {
    this.#view = view;
    this.#metrics = settings.metrics;
    // Token and session checks, with the coordinator's client tokens.
    const auth = new HttpAuth(settings.tokens, {
      secureCookie: settings.tls !== null,
      onRefused: (remote, reason) =>
        settings.report({ type: 'auth.refused', port: 'http', remote, reason }),
    });
    this.#dashboard = new Dashboard(view, {
      maxActiveJobs: settings.maxActiveJobs,
      auth,
      ...(settings.uiDir !== undefined && { uiDir: settings.uiDir }),
    });
    this.#server = this.#createServer(settings);
    this.#server.maxConnections = MAX_CONNECTIONS;
    this.#server.requestTimeout = REQUEST_TIMEOUT_MS;
  }

  #createServer(settings: HttpPortSettings): Server {
    const handler = (req: IncomingMessage, res: ServerResponse): void => this.#handle(req, res);
    const tls = settings.tls;
    if (tls === null) return createServer(handler);
    const server = createHttpsServer(tls.secureContextOptions, handler);
    this.#stopReloads = tls.onReload((context) => server.setSecureContext(context));
    const report = (event: NetEvent): void => settings.report(event);
    const remoteOf = (socket: TLSSocket): string =>
      `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`;
    server.on('secureConnection', (socket: TLSSocket) =>
      report({ type: 'tls.handshake', port: 'http', remote: remoteOf(socket), ok: true }),
    );
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

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (path !== '/metrics' && path !== '/healthz') {
      if (!this.#dashboard.handle(path, req, res)) reply(res, 404, 'not found\n');
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
      this.#metrics.text().then(
        (text) => reply(res, 200, text, this.#metrics.contentType),
        (err: unknown) => reply(res, 500, `metrics failed: ${describeError(err)}\n`),
      );
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
