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
 * reconnects and reloads).
 *
 * Budgets: at most {@link MAX_STREAMS} streams at once, and at most
 * `maxStreamsPerAddress` from one address. A stream is *stalled* once what
 * was written to it has stayed unsent (the kernel's buffer towards its
 * reader full) from one message to the next for `stallMs`: its page stopped
 * reading (a frozen tab, a peer that never reads). A newcomer that finds its
 * address's budget, or the total, full takes the place of the stream that
 * stalled first (of its own address, for the address's budget); only when
 * none has stalled that long is it refused (503 `LIMIT_EXCEEDED`).
 */
import { ErrorCode } from '../protocol/error-codes.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { normalizeAddress } from '../net/admission.js';
import type { CoreEvent } from '../coordinator/view.js';
import { MAX_HTTP_STREAMS } from '../protocol/limits.js';
import type { JobState } from '../protocol/messages.js';
import { HttpError } from './responses.js';

export const TICK_MS = 250;
export const MAX_CHANGES_PER_MESSAGE = 500;
export const MAX_STREAMS = MAX_HTTP_STREAMS;
export const MAX_BUFFERED_BYTES = 1024 * 1024;
const OVERVIEW_EVERY_TICKS = 4;
const WORKERS_EVERY_TICKS = 8;

export interface LiveSources {
  overview(): Promise<unknown>;
  workers(): Promise<unknown>;
}

/** The budgets of the streams (see the module comment). */
export interface LiveLimits {
  /** Streams in all (at most {@link MAX_STREAMS}). */
  maxStreams: number;
  maxStreamsPerAddress: number;
  /** Unsent output this long, in ms, makes a stream stalled. */
  stallMs: number;
}

export const DEFAULT_LIVE_LIMITS: LiveLimits = {
  maxStreams: MAX_STREAMS,
  maxStreamsPerAddress: MAX_STREAMS / 2,
  stallMs: 10_000,
};

/** One open stream: its response, its reader's address, since when its output waits (ms; null = none waits). */
interface Stream {
  readonly res: ServerResponse;
  readonly address: string;
  backlogSinceMs: number | null;
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
  readonly #limits: LiveLimits;
  readonly #nowMs: () => number;
  /** Open streams, oldest first. */
  readonly #streams = new Map<ServerResponse, Stream>();
  readonly #byAddress = new Map<string, number>();
  #changes = new Map<string, JobChange>();
  #truncated = false;
  #purged = 0;
  #workersDirty = false;
  #ticks = 0;
  #timer: NodeJS.Timeout | null = null;
  #busy = false;

  /** `nowMs`: the clock of the stall rule (tests inject one). */
  constructor(
    sources: LiveSources,
    limits: Partial<LiveLimits> = {},
    nowMs: () => number = () => performance.now(),
  ) {
    this.#sources = sources;
    this.#limits = { ...DEFAULT_LIVE_LIMITS, ...limits };
    this.#nowMs = nowMs;
  }

  get size(): number {
    return this.#streams.size;
  }

  /** Open streams from `address`. */
  countFor(address: string): number {
    return this.#byAddress.get(normalizeAddress(address)) ?? 0;
  }

  /** Starts a stream on this response (the request was authorized already). */
  open(req: IncomingMessage, res: ServerResponse): void {
    const address = normalizeAddress(req.socket.remoteAddress ?? '?');
    this.#makeRoom(address);
    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-store',
      'X-Content-Type-Options': 'nosniff',
      Connection: 'keep-alive',
    });
    res.write('retry: 2000\n\n');
    this.#streams.set(res, { res, address, backlogSinceMs: null });
    this.#byAddress.set(address, (this.#byAddress.get(address) ?? 0) + 1);
    const drop = (): void => this.#forget(res);
    req.on('close', drop);
    res.on('close', drop);
    this.#timer ??= setInterval(() => void this.#tick(), TICK_MS);
    // The first overview and workers go out at once, not a second later.
    this.#ticks = -1;
    this.#workersDirty = true;
  }

  /**
   * Frees a place for a newcomer from `address`, closing a stalled stream
   * where a budget is full; throws 503 when none can go.
   */
  #makeRoom(address: string): void {
    const { maxStreams, maxStreamsPerAddress } = this.#limits;
    if (
      (this.#byAddress.get(address) ?? 0) >= maxStreamsPerAddress &&
      !this.#dropStalled(address)
    ) {
      throw new HttpError(
        503,
        ErrorCode.LimitExceeded,
        `at most ${maxStreamsPerAddress} live streams from one address are open, and none of them has stopped reading`,
      );
    }
    if (this.#streams.size >= maxStreams && !this.#dropStalled(null)) {
      throw new HttpError(
        503,
        ErrorCode.LimitExceeded,
        `at most ${maxStreams} live streams are open, and none of them has stopped reading`,
      );
    }
  }

  /** Closes the stream (of `address`, when given) that stalled first, if one stalled long enough. */
  #dropStalled(address: string | null): boolean {
    const notAfterMs = this.#nowMs() - this.#limits.stallMs;
    let victim: Stream | null = null;
    for (const stream of this.#streams.values()) {
      const since = stream.backlogSinceMs;
      if (since === null || since > notAfterMs) continue;
      if (address !== null && stream.address !== address) continue;
      if (victim === null || since < (victim.backlogSinceMs as number)) victim = stream;
    }
    if (victim === null) return false;
    this.#forget(victim.res);
    victim.res.destroy();
    return true;
  }

  #forget(res: ServerResponse): void {
    const stream = this.#streams.get(res);
    if (stream === undefined) return;
    this.#streams.delete(res);
    const left = (this.#byAddress.get(stream.address) ?? 1) - 1;
    if (left > 0) this.#byAddress.set(stream.address, left);
    else this.#byAddress.delete(stream.address);
    if (this.#streams.size === 0) this.#stopTimer();
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
    const nowMs = this.#nowMs();
    for (const stream of [...this.#streams.values()]) {
      const res = stream.res;
      const waiting = res.writableLength;
      if (waiting > MAX_BUFFERED_BYTES) {
        this.#forget(res);
        res.destroy();
        continue;
      }
      // Looked at before writing: what an earlier message left is still unsent.
      if (waiting === 0) stream.backlogSinceMs = null;
      else stream.backlogSinceMs ??= nowMs;
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
    for (const res of this.#streams.keys()) res.end();
    this.#streams.clear();
    this.#byAddress.clear();
  }
}
