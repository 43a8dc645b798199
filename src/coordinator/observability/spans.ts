/**
 * The coordinator's OpenTelemetry spans, when the process set tracing up.
 *
 * Like the metrics, they follow what the shell already publishes and never
 * touch the core: the core events released after each commit, and the
 * TASK_ASSIGN frames on their way to a worker. Each span marks a moment and
 * ends at once:
 *
 * - `dtp.submit` when a submission's job is durable (its accepted reply
 *   leaves with it), child of the trace context the job records;
 * - `dtp.schedule.tick` when a schedule's tick made a job;
 * - `dtp.assign` when an assignment is sent, child of the job's
 *   `dtp.submit` (or tick) span. A worker that asked for trace context gets
 *   this span's context in the TASK_ASSIGN instead of the recorded one, so
 *   its `dtp.attempt` span nests under it.
 *
 * Which span a job's assignments descend from is kept in memory while the
 * job is live here (bounded; a job this coordinator did not see submitted,
 * e.g. after a restart or a failover, descends from its recorded context).
 * When tracing is not set up, no instance exists: nothing is loaded, kept
 * or allocated per job.
 */
import type { TaskAssign } from '../../protocol/messages.js';
import { traceContextOf, traceFields, type TraceContext } from '../../protocol/trace-context.js';
import { loadOtel, recordMomentSpan, type OtelApi } from '../../observability/tracing.js';
import type { CoreEvent } from '../core/types.js';

/** Jobs whose parent span is remembered at most; the oldest is forgotten first beyond it. */
export const MAX_REMEMBERED_JOBS = 100_000;

interface TracedSession {
  readonly workerId: string;
  /** It asked for trace context with its assignments. */
  readonly traceContext: boolean;
}

export class CoordinatorSpans {
  readonly #api: OtelApi;
  /** The span each live job's assignments descend from (`dtp.submit` or `dtp.schedule.tick`). */
  readonly #parents = new Map<string, TraceContext>();
  /** Registered worker sessions, by connection. */
  readonly #sessions = new Map<number, TracedSession>();
  /** The connection of each registered worker. */
  readonly #connOf = new Map<string, number>();
  readonly #limit: number;

  constructor(api: OtelApi, limit = MAX_REMEMBERED_JOBS) {
    this.#api = api;
    this.#limit = limit;
  }

  /** The spans of this process, or null when OpenTelemetry is not set up here (tracing.ts). */
  static async load(): Promise<CoordinatorSpans | null> {
    const api = await loadOtel();
    return api === null ? null : new CoordinatorSpans(api);
  }

  /** Jobs whose parent span is remembered (tests). */
  get remembered(): number {
    return this.#parents.size;
  }

  /** A new term serves: the sessions and jobs of an earlier one are gone. */
  reset(): void {
    this.#parents.clear();
    this.#sessions.clear();
    this.#connOf.clear();
  }

  /** One core event, released after its commit. */
  event(event: CoreEvent): void {
    const api = this.#api;
    const type = event.type;
    if (type === 'worker.registered') {
      const { workerId, connId, traceContext } = event;
      this.#sessions.set(connId, { workerId, traceContext });
      this.#connOf.set(workerId, connId);
    } else if (type === 'worker.lost') {
      const connId = this.#connOf.get(event.workerId);
      if (connId === undefined) return;
      this.#connOf.delete(event.workerId);
      this.#sessions.delete(connId);
    } else if (type === 'job.submitted') {
      // A schedule's job descends from its tick's span instead (schedule.fired follows).
      if (event.scheduleName !== null) return;
      const context = recordMomentSpan(api, 'dtp.submit', api.SpanKind.SERVER, event.traceContext, {
        'dtp.job.id': event.jobId,
        'dtp.task.type': event.taskType,
        'dtp.queue': event.queue,
      });
      this.#remember(event.jobId, context);
    } else if (type === 'schedule.fired') {
      const context = recordMomentSpan(api, 'dtp.schedule.tick', api.SpanKind.INTERNAL, null, {
        'dtp.schedule.name': event.name,
        'dtp.job.id': event.jobId,
      });
      this.#remember(event.jobId, context);
    } else if (type === 'job.completed' || type === 'job.failed' || type === 'job.cancelled') {
      this.#parents.delete(event.jobId);
    }
  }

  /**
   * A TASK_ASSIGN about to be sent on `connId`: records its `dtp.assign`
   * span and returns the message to send (to a worker that asked for trace
   * context, one that carries this span's context).
   */
  assigning(connId: number, msg: TaskAssign): TaskAssign {
    const api = this.#api;
    const session = this.#sessions.get(connId);
    const parent = this.#parents.get(msg.jobId) ?? traceContextOf(msg);
    const context = recordMomentSpan(api, 'dtp.assign', api.SpanKind.PRODUCER, parent, {
      'dtp.job.id': msg.jobId,
      'dtp.task.type': msg.taskType,
      'dtp.attempt.number': msg.attemptNumber,
      ...(session === undefined ? {} : { 'dtp.worker.id': session.workerId }),
    });
    if (session?.traceContext !== true) return msg;
    const traced: TaskAssign = { ...msg, ...traceFields(context) };
    if (context.tracestate === null) delete traced.tracestate;
    return traced;
  }

  #remember(jobId: string, context: TraceContext): void {
    this.#parents.set(jobId, context);
    if (this.#parents.size <= this.#limit) return;
    const oldest = this.#parents.keys().next();
    if (oldest.done !== true) this.#parents.delete(oldest.value);
  }
}
