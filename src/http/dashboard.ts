/**
 * The dashboard side of the HTTP port: the page shell and its assets (`/`,
 * `/assets/*`), the JSON API (`/api/*`, see api.ts) and its live stream
 * (`/api/events`, see live.ts), and the authorization rule for everything
 * but `/healthz` and the shell (tokens and sessions: coordinator/http-auth.ts).
 * The HTTP server hands it every
 * request it does not answer itself.
 */
import { ErrorCode } from '../protocol/error-codes.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CoreEvent } from '../coordinator/view.js';
import type { HttpAuth } from './http-auth.js';
import { ActivityLog, activityKind } from './activity.js';
import {
  cancelJob,
  jobDetails,
  listJobs,
  overview,
  purge,
  rerunJob,
  workers,
  type ApiContext,
  type DashboardSource,
} from './api.js';
import { LiveStreams } from './live.js';
import { QueryParams, onlyFields, readJsonBody } from './params.js';
import { HttpError, HttpErrorCode, sendError, sendJson } from './responses.js';
import { StaticFiles } from './static-files.js';

/** API requests handled at once; more get 503 (each holds a core request). */
export const MAX_API_IN_FLIGHT = 64;

export interface DashboardOptions {
  maxActiveJobs: number;
  /** Tokens and sessions; null = everything is open. */
  auth: HttpAuth | null;
  /** Folder of the built page (default: dist/ui). */
  uiDir?: string;
  now?: () => number;
}

type Method = 'GET' | 'POST' | 'DELETE';

export class Dashboard {
  readonly #ctx: ApiContext;
  readonly #auth: HttpAuth | null;
  readonly #static: StaticFiles;
  readonly #live: LiveStreams;
  readonly #onEvent: (event: CoreEvent) => void;
  #inFlight = 0;

  constructor(source: DashboardSource, options: DashboardOptions) {
    const now = options.now ?? Date.now;
    const activity = new ActivityLog(now());
    this.#ctx = { source, activity, maxActiveJobs: options.maxActiveJobs, now };
    this.#auth = options.auth;
    this.#static = new StaticFiles(options.uiDir);
    this.#live = new LiveStreams({
      overview: () => Promise.resolve(overview(this.#ctx)),
      workers: () => workers(this.#ctx),
    });
    this.#onEvent = (event) => {
      const kind = activityKind(event);
      if (kind !== null) activity.record(kind, now());
      this.#live.note(event);
    };
    source.events.on('event', this.#onEvent);
  }

  /** True when the request may see job data and metrics. */
  authorizes(req: IncomingMessage): boolean {
    return this.#auth === null || this.#auth.authorize(req);
  }

  /** Answers the request if the path is the dashboard's; false otherwise. */
  handle(path: string, req: IncomingMessage, res: ServerResponse): boolean {
    if (path === '/api' || path.startsWith('/api/')) {
      void this.#api(path, req, res);
      return true;
    }
    if (req.method !== 'GET') return false;
    return this.#static.serve(path, req, res);
  }

  async #api(path: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (this.#inFlight >= MAX_API_IN_FLIGHT) {
      sendError(
        res,
        new HttpError(
          503,
          ErrorCode.LimitExceeded,
          `${MAX_API_IN_FLIGHT} API requests are in progress`,
        ),
      );
      return;
    }
    this.#inFlight++;
    try {
      await this.#route(path, req, res);
    } catch (err) {
      sendError(
        res,
        err instanceof HttpError ? err : new HttpError(500, ErrorCode.InternalError, String(err)),
      );
    } finally {
      this.#inFlight--;
    }
  }

  async #route(path: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (path === '/api/session') return this.#session(req, res);
    if (!this.authorizes(req)) {
      throw new HttpError(
        401,
        HttpErrorCode.Unauthenticated,
        'Unauthenticated: a client token is required (Authorization: Bearer, or POST /api/session)',
      );
    }
    const query = (allowed: readonly string[]): QueryParams =>
      new QueryParams(url.searchParams, allowed);
    const ctx = this.#ctx;
    if (path === '/api/overview') {
      allow(req, 'GET');
      query([]);
      return sendJson(res, 200, overview(ctx));
    }
    if (path === '/api/jobs') {
      allow(req, 'GET');
      return sendJson(
        res,
        200,
        await listJobs(ctx, query(['state', 'type', 'limit', 'cursor', 'search'])),
      );
    }
    if (path === '/api/workers') {
      allow(req, 'GET');
      query([]);
      return sendJson(res, 200, await workers(ctx));
    }
    if (path === '/api/events') {
      allow(req, 'GET');
      query([]);
      return this.#live.open(req, res);
    }
    if (path === '/api/purge') {
      allow(req, 'POST');
      query([]);
      return sendJson(res, 200, await purge(ctx, await readJsonBody(req)));
    }
    return this.#jobRoute(path, req, res, query);
  }

  async #jobRoute(
    path: string,
    req: IncomingMessage,
    res: ServerResponse,
    query: (allowed: readonly string[]) => QueryParams,
  ): Promise<void> {
    const match = /^\/api\/jobs\/([^/]+)(?:\/(cancel|rerun))?$/.exec(path);
    if (match === null)
      throw new HttpError(404, HttpErrorCode.NotFound, `no such API path: ${path.slice(0, 100)}`);
    const jobId = decodeURIComponent(match[1] as string);
    query([]);
    switch (match[2]) {
      case undefined:
        allow(req, 'GET');
        return sendJson(res, 200, await jobDetails(this.#ctx, jobId));
      case 'cancel':
        allow(req, 'POST');
        onlyFields(await readJsonBody(req), []);
        return sendJson(res, 200, await cancelJob(this.#ctx, jobId));
      default:
        allow(req, 'POST');
        onlyFields(await readJsonBody(req), []);
        return sendJson(res, 201, await rerunJob(this.#ctx, jobId));
    }
  }

  /** GET: does the page need a token, and has it a session; POST: log in; DELETE: log out. */
  async #session(req: IncomingMessage, res: ServerResponse): Promise<void> {
    allow(req, 'GET', 'POST', 'DELETE');
    const auth = this.#auth;
    if (req.method === 'GET') {
      return sendJson(res, 200, {
        authRequired: auth?.required ?? false,
        authenticated: auth?.isAuthorized(req) ?? true,
      });
    }
    if (req.method === 'DELETE') {
      const headers: Record<string, string> = {};
      if (auth !== null) headers['Set-Cookie'] = auth.endSession(req);
      return sendJson(res, 200, { authenticated: false }, headers);
    }
    // The token comes in a JSON body (a cross-site form cannot send one), or
    // as a bearer header with an empty JSON body.
    const body = await readJsonBody(req);
    onlyFields(body, ['token']);
    if (body.token !== undefined && (typeof body.token !== 'string' || body.token === ''))
      throw new HttpError(400, HttpErrorCode.BadRequest, 'token must be a non-empty string');
    const cookie = auth === null ? '' : auth.openSession(req, body.token ?? null);
    if (cookie === null)
      throw new HttpError(401, HttpErrorCode.Unauthenticated, 'Unauthenticated: token refused');
    return sendJson(
      res,
      200,
      { authenticated: true },
      cookie === '' ? {} : { 'Set-Cookie': cookie },
    );
  }

  /** Ends the live streams and stops listening to events. Idempotent. */
  close(): void {
    this.#live.close();
    this.#ctx.source.events.off('event', this.#onEvent);
  }
}

function allow(req: IncomingMessage, ...methods: Method[]): void {
  if (!methods.includes(req.method as Method)) {
    throw new HttpError(
      405,
      HttpErrorCode.MethodNotAllowed,
      `${req.method ?? '?'} is not allowed here; use ${methods.join(' or ')}`,
      {
        allow: methods.join(', '),
      },
    );
  }
}
