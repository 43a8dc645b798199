/**
 * The page's calls to the coordinator's JSON API (docs/HTTP.md). The types
 * are the server's own (type-only imports: nothing of the server is bundled).
 * Every failure becomes an {@link ApiError} carrying the server's message.
 */
import type {
  CancelResult,
  FlowNode,
  FlowView,
  JobDetails,
  JobPage,
  Overview,
  PurgeResult,
  RerunResult,
  WorkersResult,
} from '../../src/http/api.js';
import type {
  ScheduleDetails,
  ScheduleList,
  ScheduleView,
  TriggerResult,
} from '../../src/http/schedules-api.js';
import type { PublishResult, SignalResult, TriggersResult } from '../../src/http/signals-api.js';
import type {
  JsonValue,
  QueueInfo,
  JobState,
  TerminalState,
  TriggerSnapshot,
} from '../../src/protocol/messages.js';

export type {
  CancelResult,
  FlowNode,
  FlowView,
  JobDetails,
  JobPage,
  Overview,
  PublishResult,
  PurgeResult,
  QueueInfo,
  RerunResult,
  ScheduleDetails,
  ScheduleList,
  ScheduleView,
  SignalResult,
  TriggerResult,
  TriggerSnapshot,
  TriggersResult,
  WorkersResult,
};

/**
 * Snapshot fields a coordinator may send that the server's types here do not
 * name (child jobs made by a handler, durable steps): shown when present.
 */
export interface JobExtras {
  /** The job whose handler made this one. */
  parentJobId?: string | null;
  /** Jobs this one's handler made. */
  children?: string[] | null;
  /** Durable steps its handler finished, oldest first. */
  steps?: { name: string; atMillis: number; resultBytes?: number | null }[] | null;
}

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;

  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Called when any request answers 401 (the session ended): the page asks for a token again. */
let onUnauthenticated: () => void = () => undefined;
export function setUnauthenticatedHandler(handler: () => void): void {
  onUnauthenticated = handler;
}

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const init: RequestInit = { method, credentials: 'same-origin', headers: {} };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = { 'content-type': 'application/json' };
  }
  const res = await fetch(path, init);
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = text === '' ? null : JSON.parse(text);
  } catch {
    parsed = null;
  }
  if (!res.ok) {
    const error = (parsed as { error?: { code?: string; message?: string } } | null)?.error;
    if (res.status === 401 && !path.startsWith('/api/session')) onUnauthenticated();
    throw new ApiError(
      res.status,
      error?.code ?? 'HTTP_ERROR',
      error?.message ?? `HTTP ${res.status}`,
    );
  }
  return parsed as T;
}

export interface SessionState {
  authRequired: boolean;
  authenticated: boolean;
}

export interface JobQuery {
  state?: JobState | undefined;
  type?: string | undefined;
  search?: string | undefined;
  cursor?: string | undefined;
  limit?: number | undefined;
}

function queryString(query: JobQuery): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== '') params.set(name, String(value));
  }
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}

const jobPath = (jobId: string): string => `/api/jobs/${encodeURIComponent(jobId)}`;
const queuePath = (name: string): string => `/api/queues/${encodeURIComponent(name)}`;
const schedulePath = (name: string): string => `/api/schedules/${encodeURIComponent(name)}`;

export const api = {
  session: () => call<SessionState>('GET', '/api/session'),
  login: (token: string) => call<{ authenticated: boolean }>('POST', '/api/session', { token }),
  logout: () => call<{ authenticated: boolean }>('DELETE', '/api/session'),
  overview: () => call<Overview>('GET', '/api/overview'),
  jobs: (query: JobQuery) => call<JobPage>('GET', `/api/jobs${queryString(query)}`),
  job: (jobId: string) => call<JobDetails>('GET', jobPath(jobId)),
  flow: (jobId: string) => call<FlowView>('GET', `${jobPath(jobId)}/flow`),
  cancel: (jobId: string) => call<CancelResult>('POST', `${jobPath(jobId)}/cancel`, {}),
  rerun: (jobId: string) => call<RerunResult>('POST', `${jobPath(jobId)}/rerun`, {}),
  signal: (jobId: string, name: string, payload: JsonValue) =>
    call<SignalResult>('POST', `${jobPath(jobId)}/signal`, { name, payload }),
  triggers: () => call<TriggersResult>('GET', '/api/triggers'),
  purge: (state: TerminalState, olderThan: string) =>
    call<PurgeResult>('POST', '/api/purge', { state, olderThan }),
  workers: () => call<WorkersResult>('GET', '/api/workers'),
  queues: () => call<{ queues: QueueInfo[] }>('GET', '/api/queues'),
  pauseQueue: (name: string, paused: boolean) =>
    call<QueueInfo>('POST', `${queuePath(name)}/${paused ? 'pause' : 'resume'}`, {}),
  schedules: () => call<ScheduleList>('GET', '/api/schedules'),
  schedule: (name: string) => call<ScheduleDetails>('GET', schedulePath(name)),
  pauseSchedule: (name: string, paused: boolean) =>
    call<ScheduleView>('POST', `${schedulePath(name)}/${paused ? 'pause' : 'resume'}`, {}),
  triggerSchedule: (name: string) =>
    call<TriggerResult>('POST', `${schedulePath(name)}/trigger`, {}),
};
