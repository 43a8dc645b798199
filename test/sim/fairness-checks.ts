/**
 * The fairness bound of group turns (src/coordinator/core/ready-queue.ts),
 * checked at every attempt start: while a group has a job waiting in a queue
 * and base priority (a *ring*), each other group of the ring is started at
 * most once before it by a pick that could have taken that job.
 *
 * "Could have taken" is judged from outside the core, conservatively: the
 * worker that received the other group's attempt runs the waiting job's
 * task type (and, receiving a job of the same queue, takes that queue), so
 * it had a free slot for it. A waiting job is one that was QUEUED before the
 * input and is still QUEUED after it, or started by it (until its own start).
 * Rings of queues with a group limit are left out (a group held by one is
 * parked and rejoins at the back, which the bound does not describe), so
 * are those of a queue a handler's rate limit holds back (the same), and a
 * restart or a new leader starts the count afresh (the ring is rebuilt). So
 * does an input that expires a job, from its end: the scheduler may have
 * picked it (its group's turn was used, sending the group to the back) only
 * to find it expired, a turn no start shows, between two starts of that
 * input.
 */
import type { CoordinatorCore, QueuedJobView } from '../../src/coordinator/core/core.js';
import { BUILTIN_TASK_TYPES } from '../../src/protocol/task-types.js';
import type { Judge } from './violation.js';
import type { HandledInput } from './world.js';

const ringOf = (job: QueuedJobView): string => `${job.queue}\t${job.priority}`;
const groupOf = (job: QueuedJobView): string => job.groupKey ?? '';

/** The ready-queue place of an active job (rare: O(active jobs)). */
function placeOf(core: CoordinatorCore, jobId: string): QueuedJobView | undefined {
  const row = core.activeJobs().find((j) => j.jobId === jobId);
  if (row === undefined) return undefined;
  const { queue, groupKey, priority, taskType } = row;
  return { jobId, queue, groupKey, priority, taskType };
}

export class FairnessChecks {
  readonly #judge: Judge;
  #core: CoordinatorCore | null = null;
  /** The QUEUED jobs after the last input handled. */
  #queued = new Map<string, QueuedJobView>();
  /** Per ring and waiting group: how often each other group was started since it waited. */
  readonly #passed = new Map<string, Map<string, number>>();
  /** Starts at which another group of the ring had a job that start could have taken (coverage). */
  contested = 0;

  constructor(judge: Judge) {
    this.#judge = judge;
  }

  onCrash(): void {
    this.#core = null;
  }

  /** `held(queue)`: a handler's rate limit holds (or lately held) a group or the whole queue back. */
  onHandled(
    handled: HandledInput,
    core: CoordinatorCore,
    held: (queue: string) => boolean = () => false,
  ): void {
    if (core !== this.#core) {
      this.#core = core;
      this.#passed.clear();
      this.#queued.clear();
    }
    const before = this.#queued;
    this.#queued = new Map([...core.queuedJobs()].map((j) => [j.jobId, j]));
    if (handled.effects.some((e) => e.kind === 'event' && e.event.type === 'job.expired')) {
      this.#passed.clear();
      return;
    }
    const starts: { jobId: string; connId: number }[] = [];
    for (const e of handled.effects) {
      if (e.kind === 'send' && e.msg.type === 'TASK_ASSIGN') {
        starts.push({ jobId: e.msg.jobId, connId: e.connId });
      }
    }
    if (starts.length > 0) this.#checkStarts(before, starts, core, held);
    this.#forgetGone();
  }

  #checkStarts(
    before: Map<string, QueuedJobView>,
    starts: readonly { jobId: string; connId: number }[],
    core: CoordinatorCore,
    held: (queue: string) => boolean,
  ): void {
    const view = core.inspect();
    const limited = new Set(
      view.queues
        .filter((q) => q.settings.groupConcurrency !== null || q.settings.groupRate !== null)
        .map((q) => q.name),
    );
    const isLimited = (queue: string): boolean => limited.has(queue) || held(queue);
    const typesOf = new Map(
      view.workers.map((w) => [w.connId, new Set(w.taskTypes ?? BUILTIN_TASK_TYPES)]),
    );
    const startedIds = new Set(starts.map((s) => s.jobId));
    const waiting = new Map(
      [...before].filter(([id]) => this.#queued.has(id) || startedIds.has(id)),
    );
    for (const { jobId, connId } of starts) {
      // A job queued and started within this input (a released sleeper) is a pick like any other.
      const job = waiting.get(jobId) ?? placeOf(core, jobId);
      waiting.delete(jobId);
      if (job === undefined || isLimited(job.queue)) continue;
      const types = typesOf.get(connId);
      if (types !== undefined) this.#onStart(job, types, waiting);
    }
    for (const key of [...this.#passed.keys()]) {
      if (isLimited(key.split('\t', 1)[0] as string)) this.#passed.delete(key);
    }
  }

  /** `job` started on a worker that runs `types`: it passed every other group waiting for one of them. */
  #onStart(
    job: QueuedJobView,
    types: ReadonlySet<string>,
    waiting: Map<string, QueuedJobView>,
  ): void {
    const ring = ringOf(job);
    const served = groupOf(job);
    this.#passed.delete(`${ring}\t${served}`);
    const passedGroups = new Map<string, string>();
    for (const w of waiting.values()) {
      if (ringOf(w) === ring && groupOf(w) !== served && types.has(w.taskType)) {
        passedGroups.set(groupOf(w), w.jobId);
      }
    }
    if (passedGroups.size > 0) this.contested++;
    for (const [g, waitingJob] of passedGroups) {
      const key = `${ring}\t${g}`;
      const counts = this.#passed.get(key) ?? new Map<string, number>();
      const n = (counts.get(served) ?? 0) + 1;
      counts.set(served, n);
      this.#passed.set(key, counts);
      this.#judge.check(
        n <= 1,
        () =>
          `ring ${ring.replace('\t', '/')}: group "${served}" started ${n} times (now ${job.jobId}) while group "${g}" waited with a job its worker runs (${waitingJob})`,
      );
    }
  }

  /** A group with nothing queued left its ring: its count starts afresh when it comes back. */
  #forgetGone(): void {
    if (this.#passed.size === 0) return;
    const present = new Set<string>();
    for (const j of this.#queued.values()) present.add(`${ringOf(j)}\t${groupOf(j)}`);
    for (const key of [...this.#passed.keys()]) if (!present.has(key)) this.#passed.delete(key);
  }
}
