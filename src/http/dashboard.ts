/**
 * The dashboard side of the HTTP port: the page shell and its assets (`/`,
 * `/assets/*`), the JSON API (`/api/*`, see api.ts; signals, events and
 * triggers in signals-api.ts) and its live stream (`GET /api/events`, see
 * live.ts), and the authorization rule for everything
 * but `/healthz` and the shell (tokens and sessions: http-auth.ts).
 * The HTTP server hands it every
 * request it does not answer itself.
 */
import { listQueues, pauseQueue, setQueueLimits } from './queues-api.js';
import { listSchedules, pauseSchedule, scheduleDetails, triggerSchedule } from './schedules-api.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CoreEvent, CronEvaluator } from '../coordinator/view.js';
import { ErrorCode } from '../protocol/error-codes.js';
import type { HttpAuth } from './http-auth.js';
import { ActivityLog, activityKind } from './activity.js';
import {
  cancelJob,
  jobDetails,
  jobFlow,
  listJobs,
  overview,
  purge,
  rerunJob,
  workers,
  type ApiContext,
  type DashboardSource,
} from './api.js';
import { LiveStreams, type LiveLimits } from './live.js';
import {
  MAX_BODY_BYTES,
  MAX_SIGNAL_BODY_BYTES,
  QueryParams,
  jsonBody,
  onlyFields,
  readBody,
} from './params.js';
import type { RequestTarget } from './request-target.js';
import { HttpError, HttpErrorCode, sendError, sendJson } from './responses.js';
import { listTriggers, publishEvent, signalJob } from './signals-api.js';
import { StaticFiles } from './static-files.js';

/** API requests handled at once; more get 503 (each holds a core request). */
export const MAX_API_IN_FLIGHT = 64;

export interface DashboardOptions {
  maxActiveJobs: number;
  /** Tokens and sessions; null = everything is open. */
  auth: HttpAuth | null;
  /** Folder of the built page (default: dist/ui). */
  uiDir?: string;
  /** The coordinator's cron evaluator (a schedule's next runs). */
  cron: CronEvaluator;
  now?: () => number;
  /** Budgets of the live streams (default DEFAULT_LIVE_LIMITS in live.ts). */
  live?: Partial<LiveLimits>;
}

type Method = 'GET' | 'POST' | 'DELETE';

/** What a route gets: the request, its target, and its body as JSON (read on demand). */
interface Call {
  req: IncomingMessage;
  res: ServerResponse;
  target: RequestTarget;
  json: () => Record<string, unknown>;
}

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
    this.#ctx = { source, activity, maxActiveJobs: options.maxActiveJobs, cron: options.cron, now };
    this.#auth = options.auth;
    this.#static = new StaticFiles(options.uiDir);
    this.#live = new LiveStreams(
      {
        overview: () => Promise.resolve(overview(this.#ctx)),
        workers: () => workers(this.#ctx),
      },
      options.live,
    );
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
  handle(target: RequestTarget, req: IncomingMessage, res: ServerResponse): boolean {
    if (isApiPath(target.path)) {
      void this.#api(target, req, res);
      return true;
    }
    if (req.method !== 'GET') return false;
    return this.#static.serve(target.path, req, res);
  }

  /** Never rejects: every failure becomes an error answer (or, once answering, a close). */
  async #api(target: RequestTarget, req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      // The body is in before the request counts as in progress (see readBody).
      const body = await readBody(req, bodyLimitOf(target.path));
      if (this.#inFlight >= MAX_API_IN_FLIGHT) {
        const message = `${MAX_API_IN_FLIGHT} API requests are in progress`;
        throw new HttpError(503, ErrorCode.LimitExceeded, message);
      }
      this.#inFlight++;
      try {
        await this.#route({ req, res, target, json: () => jsonBody(req, body) });
      } finally {
        this.#inFlight--;
      }
    } catch (err) {
      sendErrorSafely(res, err);
    }
  }

  async #route(call: Call): Promise<void> {
    const { req, res, target } = call;
    const path = target.path;
    if (path === '/api/session') return this.#session(call);
    if (!this.authorizes(req)) {
      throw new HttpError(
        401,
        HttpErrorCode.Unauthenticated,
        'Unauthenticated: a client token is required (Authorization: Bearer, or POST /api/session)',
      );
    }
    const query = (allowed: readonly string[]): QueryParams =>
      new QueryParams(target.query, allowed);
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
      allow(req, 'GET', 'POST');
      query([]);
      if (req.method === 'POST') return sendJson(res, 200, await publishEvent(ctx, call.json()));
      return this.#live.open(req, res);
    }
    if (path === '/api/triggers') {
      allow(req, 'GET');
      query([]);
      return sendJson(res, 200, await listTriggers(ctx));
    }
    if (path === '/api/purge') {
      allow(req, 'POST');
      query([]);
      return sendJson(res, 200, await purge(ctx, call.json()));
    }
    if (path === '/api/queues' || path.startsWith('/api/queues/'))
      return this.#queueRoute(call, query);
    if (path === '/api/schedules' || path.startsWith('/api/schedules/'))
      return this.#scheduleRoute(call, query);
    return this.#jobRoute(call, query);
  }

  async #queueRoute(call: Call, query: (allowed: readonly string[]) => QueryParams): Promise<void> {
    const { req, res } = call;
    const path = call.target.path;
    query([]);
    const source = this.#ctx.source;
    if (path === '/api/queues') {
      allow(req, 'GET');
      return sendJson(res, 200, await listQueues(source));
    }
    const match = /^\/api\/queues\/([^/]+)(?:\/(pause|resume))?$/.exec(path);
    if (match === null)
      throw new HttpError(404, HttpErrorCode.NotFound, `no such API path: ${path.slice(0, 100)}`);
    const name = decodePathSegment(match[1] as string);
    allow(req, 'POST');
    if (match[2] === undefined) {
      return sendJson(res, 200, await setQueueLimits(source, name, call.json()));
    }
    return sendJson(res, 200, await pauseQueue(source, name, match[2] === 'pause', call.json()));
  }

  async #scheduleRoute(
    call: Call,
    query: (allowed: readonly string[]) => QueryParams,
  ): Promise<void> {
    const { req, res } = call;
    const path = call.target.path;
    query([]);
    const ctx = this.#ctx;
    if (path === '/api/schedules') {
      allow(req, 'GET');
      return sendJson(res, 200, await listSchedules(ctx));
    }
    const match = /^\/api\/schedules\/([^/]+)(?:\/(pause|resume|trigger))?$/.exec(path);
    if (match === null)
      throw new HttpError(404, HttpErrorCode.NotFound, `no such API path: ${path.slice(0, 100)}`);
    const name = decodePathSegment(match[1] as string);
    if (match[2] === undefined) {
      allow(req, 'GET');
      return sendJson(res, 200, await scheduleDetails(ctx, name));
    }
    allow(req, 'POST');
    onlyFields(call.json(), []);
    if (match[2] === 'trigger') return sendJson(res, 201, await triggerSchedule(ctx, name));
    return sendJson(res, 200, await pauseSchedule(ctx, name, match[2] === 'pause'));
  }

  async #jobRoute(call: Call, query: (allowed: readonly string[]) => QueryParams): Promise<void> {
    const { req, res } = call;
    const path = call.target.path;
    const match = /^\/api\/jobs\/([^/]+)(?:\/(cancel|rerun|flow|signal))?$/.exec(path);
    if (match === null)
      throw new HttpError(404, HttpErrorCode.NotFound, `no such API path: ${path.slice(0, 100)}`);
    const jobId = decodePathSegment(match[1] as string);
    query([]);
    switch (match[2]) {
      case undefined:
        allow(req, 'GET');
        return sendJson(res, 200, await jobDetails(this.#ctx, jobId));
      case 'flow':
        allow(req, 'GET');
        return sendJson(res, 200, await jobFlow(this.#ctx, jobId));
      case 'cancel':
        allow(req, 'POST');
        onlyFields(call.json(), []);
        return sendJson(res, 200, await cancelJob(this.#ctx, jobId));
      case 'signal':
        allow(req, 'POST');
        return sendJson(res, 200, await signalJob(this.#ctx, jobId, call.json()));
      default:
        allow(req, 'POST');
        onlyFields(call.json(), []);
        return sendJson(res, 201, await rerunJob(this.#ctx, jobId));
    }
  }

  /** GET: does the page need a token, and has it a session; POST: log in; DELETE: log out. */
  #session({ req, res, json }: Call): void {
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
    const body = json();
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

/** The paths whose body may carry a signal's or event's payload take more than the others. */
function bodyLimitOf(path: string): number {
  return path === '/api/events' || /^\/api\/jobs\/[^/]+\/signal$/.test(path)
    ? MAX_SIGNAL_BODY_BYTES
    : MAX_BODY_BYTES;
}

function isApiPath(path: string): boolean {
  return path === '/api' || path.startsWith('/api/');
}

/** A percent-escaped path segment; a malformed escape is the request's fault (400). */
function decodePathSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, HttpErrorCode.BadRequest, 'malformed percent escape in the path');
  }
}

/** {@link sendError} for anything thrown; a failure to answer closes the connection. */
function sendErrorSafely(res: ServerResponse, err: unknown): void {
  const error =
    err instanceof HttpError ? err : new HttpError(500, ErrorCode.InternalError, String(err));
  try {
    sendError(res, error);
  } catch {
    res.destroy();
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
