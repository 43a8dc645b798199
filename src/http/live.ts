/**
 * Live updates for the dashboard: one Server-Sent Events stream per open
 * page (`GET /api/events`), fed from the core's committed events.
 *
 * Event names and data (JSON):
 * - `jobs`: `{changes: [{jobId, state, taskType?}], truncated}`, the jobs
 *   whose state (or progress) changed since the previous message, coalesced
 *   (a job's last state wins), at most {@link MAX_CHANGES_PER_MESSAGE}; `truncated` means
 *   more changed and a page should reload what it shows;
 * - `overview`: the same document as `GET /api/overview`, every second;
 * - `workers`: the same document as `GET /api/workers`, every two seconds
 *   and soon after a worker registers, drains or is lost;
 * - `purged`: `{deleted}` after rows were deleted (retention or purge).
 *
 * One timer runs while at least one stream is open. A stream whose reader
 * falls behind by more than {@link MAX_BUFFERED_BYTES} is closed (the page
 * reconnects and reloads); at most {@link MAX_STREAMS} are open at once.
 */
import { ErrorCode } from '../protocol/error-codes.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CoreEvent } from '../coordinator/view.js';
import type { JobState } from '../protocol/messages.js';
import { HttpError } from './responses.js';

export const TICK_MS = 250;
export const MAX_CHANGES_PER_MESSAGE = 500;
export const MAX_STREAMS = 32;
export const MAX_BUFFERED_BYTES = 1024 * 1024;
const OVERVIEW_EVERY_TICKS = 4;
const WORKERS_EVERY_TICKS = 8;

export interface LiveSources {
  overview(): Promise<unknown>;
  workers(): Promise<unknown>;
}

/** One job's new state in a `jobs` message. */
export interface JobChange {
  jobId: string;
  state: JobState;
  taskType?: string;
}

/** The state each job event leaves its job in. */
const STATE_AFTER: Partial<Record<CoreEvent['type'], JobState>> = {
  'job.due': 'QUEUED',
  'job.assigned': 'RUNNING',
  'job.completed': 'COMPLETED',
  'job.failed': 'FAILED',
  'job.cancelled': 'CANCELLED',
  'job.retryScheduled': 'RETRY_WAIT',
  'job.requeued': 'QUEUED',
};

/** The state a job is in after an event, or null for events that change none. */
export function jobChange(event: CoreEvent): JobChange | null {
  if (event.type === 'job.recovered') return { jobId: event.jobId, state: event.to };
  // New progress: the job is still RUNNING, but a page showing it reloads it.
  if (event.type === 'job.progress') {
    return event.accepted ? { jobId: event.jobId, state: 'RUNNING' } : null;
  }
  if (event.type === 'job.submitted') {
    return { jobId: event.jobId, state: event.state, taskType: event.taskType };
  }
  const state = STATE_AFTER[event.type];
  if (state === undefined || !('jobId' in event)) return null;
  return { jobId: event.jobId, state };
}

/** The data of a `jobs` message. */
export interface JobsMessage {
  changes: JobChange[];
  truncated: boolean;
}

export class LiveStreams {
  readonly #sources: LiveSources;
  readonly #streams = new Set<ServerResponse>();
  #changes = new Map<string, JobChange>();
  #truncated = false;
  #purged = 0;
  #workersDirty = false;
  #ticks = 0;
  #timer: NodeJS.Timeout | null = null;
  #busy = false;

  constructor(sources: LiveSources) {
    this.#sources = sources;
  }

  get size(): number {
    return this.#streams.size;
  }

  /** Starts a stream on this response (the request was authorized already). */
  open(req: IncomingMessage, res: ServerResponse): void {
    if (this.#streams.size >= MAX_STREAMS) {
      throw new HttpError(
        503,
        ErrorCode.LimitExceeded,
        `at most ${MAX_STREAMS} live streams are open`,
      );
    }
    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-store',
      'X-Content-Type-Options': 'nosniff',
      Connection: 'keep-alive',
    });
    res.write('retry: 2000\n\n');
    this.#streams.add(res);
    const drop = (): void => {
      this.#streams.delete(res);
      if (this.#streams.size === 0) this.#stopTimer();
    };
    req.on('close', drop);
    res.on('close', drop);
    this.#timer ??= setInterval(() => void this.#tick(), TICK_MS);
    // The first overview and workers go out at once, not a second later.
    this.#ticks = -1;
    this.#workersDirty = true;
  }

  /** A committed core event. */
  note(event: CoreEvent): void {
    if (this.#streams.size === 0) return;
    const change = jobChange(event);
    if (change !== null) {
      if (this.#changes.size < MAX_CHANGES_PER_MESSAGE || this.#changes.has(change.jobId)) {
        const previous = this.#changes.get(change.jobId);
        this.#changes.set(change.jobId, { ...previous, ...change });
      } else {
        this.#truncated = true;
      }
      return;
    }
    if (event.type === 'jobs.purged') this.#purged += event.deleted;
    else if (event.type.startsWith('worker.')) this.#workersDirty = true;
  }

  async #tick(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      this.#ticks++;
      this.#flushJobs();
      if (this.#ticks % OVERVIEW_EVERY_TICKS === 0) {
        this.#broadcast('overview', await this.#sources.overview());
      }
      if (this.#workersDirty || this.#ticks % WORKERS_EVERY_TICKS === 0) {
        this.#workersDirty = false;
        this.#broadcast('workers', await this.#sources.workers());
      }
    } catch {
      // A source that failed (the coordinator stopping) skips this tick.
    } finally {
      this.#busy = false;
    }
  }

  #flushJobs(): void {
    if (this.#changes.size > 0 || this.#truncated) {
      const message: JobsMessage = {
        changes: [...this.#changes.values()],
        truncated: this.#truncated,
      };
      this.#broadcast('jobs', message);
      this.#changes = new Map();
      this.#truncated = false;
    }
    if (this.#purged > 0) {
      this.#broadcast('purged', { deleted: this.#purged });
      this.#purged = 0;
    }
  }

  #broadcast(event: string, data: unknown): void {
    const text = `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
    for (const res of this.#streams) {
      if (res.writableLength > MAX_BUFFERED_BYTES) {
        res.destroy();
        continue;
      }
      res.write(text);
    }
  }

  #stopTimer(): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }

  /** Ends every stream and the timer. Idempotent. */
  close(): void {
    this.#stopTimer();
    for (const res of this.#streams) res.end();
    this.#streams.clear();
  }
}
