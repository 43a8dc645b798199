/**
 * Invariants of recurring schedules, against a model of them kept from the
 * requests the core answered (and rebuilt from the committed schedules after
 * a crash, as the core itself is):
 * - a tick fires (or is skipped) only for a schedule that exists and is not
 *   paused, at or after its time, on its cadence (a cron tick is one of the
 *   expression's instants, an interval tick a whole number of intervals
 *   from a known tick), later than every earlier tick of it, and as the
 *   latest of the ticks due together (the next one lies after now);
 * - `overlap: skip`: no tick fires while the schedule's last job (of a tick
 *   or a trigger) is not terminal, and `overlap` skips only then;
 * - catch-up: a tick that fell due before the core started (it passed while
 *   no coordinator led) fires only with `catchUp: latest`, at most once per
 *   schedule and recovery, and is skipped as `missed` with `none` (the core
 *   emits one `missed` skip for the latest such tick: earlier ones collapse
 *   into it); `limit` skips only at the active-jobs limit;
 * - on committed state: no two committed jobs of ticks share a (schedule,
 *   tick) across restarts and failovers (a tick fired in a batch that never
 *   committed may fire again), and the batch that commits a tick's job also
 *   commits the schedule's advance past it, the job carrying the schedule's
 *   name and the tick as its `runAtMs`.
 * A schedule deleted and set again is a new generation (its `createdAtMs`):
 * ticks are told apart per generation.
 */
import { createCronEvaluator } from '../../src/coordinator/cron.js';
import type { CoreEvent, Effect } from '../../src/coordinator/core/types.js';
import type {
  JobState,
  JsonObject,
  ScheduleSnapshot,
  SubmitJob,
} from '../../src/protocol/messages.js';
import type { MemoryStore } from '../../src/store/memory-store.js';
import type { ScheduleRecord } from '../../src/store/store.js';
import type { Judge } from './violation.js';
import type { HandledInput } from './world.js';

const CRON = createCronEvaluator();

/** What the model knows of one schedule. */
export interface ModelSchedule {
  name: string;
  taskType: string;
  cron: string | null;
  everyMs: number | null;
  timezone: string | null;
  payload: JsonObject;
  maxAttempts: number | null;
  priority: ScheduleSnapshot['priority'];
  timeoutMs: number | null;
  overlap: 'allow' | 'skip';
  catchUp: 'latest' | 'none';
  paused: boolean;
  queue: string;
  lastJobId: string | null;
  lastRunAtMs: number | null;
  /** The generation: when this schedule was created (kept by replacements). */
  createdAtMs: number;
  /** A tick known to be on the current cadence (null: none known yet). */
  anchorMs: number | null;
  /** The latest tick fired or skipped (or committed as next, after a crash). */
  lastTickMs: number | null;
}

/** A tick's job, staged with its batch until it commits. */
export interface TickFact {
  name: string;
  generation: number;
  tickMs: number;
}

export interface ScheduleCounts {
  fired: number;
  skippedOverlap: number;
  skippedMissed: number;
  skippedLimit: number;
  /** Fired ticks that fell due before the core started (catch-up jobs). */
  catchUps: number;
  triggers: number;
  /** SET_SCHEDULE requests accepted, and refused as invalid. */
  set: number;
  invalid: number;
}

export class ScheduleChecks {
  readonly #judge: Judge;
  readonly #store: MemoryStore;
  readonly #maxActiveJobs: number;
  readonly #terminal: (jobId: string) => JobState | undefined;
  readonly #live = new Map<string, ModelSchedule>();
  /** When the current core started (its recovery). */
  #termStartMs = 0;
  /** Catch-up jobs of the current core, by schedule generation. */
  readonly #catchUps = new Map<string, number>();
  /** Committed tick jobs by "name/generation/tick". */
  readonly #committedTicks = new Map<string, string>();
  readonly counts: ScheduleCounts = {
    fired: 0,
    skippedOverlap: 0,
    skippedMissed: 0,
    skippedLimit: 0,
    catchUps: 0,
    triggers: 0,
    set: 0,
    invalid: 0,
  };

  constructor(options: {
    judge: Judge;
    store: MemoryStore;
    maxActiveJobs: number;
    terminal: (jobId: string) => JobState | undefined;
  }) {
    this.#judge = options.judge;
    this.#store = options.store;
    this.#maxActiveJobs = options.maxActiveJobs;
    this.#terminal = options.terminal;
  }

  /** A copy of the model of one schedule (undefined: none by that name). */
  get(name: string): ModelSchedule | undefined {
    const found = this.#live.get(name);
    return found === undefined ? undefined : { ...found };
  }

  /** Every schedule name the model holds, sorted. */
  names(): string[] {
    return [...this.#live.keys()].sort();
  }

  /** The submission a tick or trigger of `name` stands for. */
  submissionOf(name: string): SubmitJob | undefined {
    const m = this.#live.get(name);
    if (m === undefined) return undefined;
    return {
      type: 'SUBMIT_JOB',
      taskType: m.taskType,
      payload: m.payload,
      maxAttempts: m.maxAttempts,
      idempotencyKey: null,
      priority: m.priority,
      queue: m.queue,
    };
  }

  /** A core started at `nowMs` (from the committed store). */
  onRecovery(nowMs: number): void {
    this.#termStartMs = nowMs;
    this.#catchUps.clear();
  }

  /** The process died: the model is what the store committed. */
  onCrash(): void {
    this.#live.clear();
    for (const row of this.#store.committedSchedules()) this.#live.set(row.name, fromRecord(row));
  }

  /**
   * Judges the schedule events of a timed input, in order; returns the tick
   * facts to stage with the batch.
   */
  onTimedInput(h: HandledInput): TickFact[] {
    const facts: TickFact[] = [];
    // Active jobs not SCHEDULED, as the core counts them at each event.
    let counted = h.activeBefore - h.scheduledBefore;
    for (const effect of h.effects) {
      if (effect.kind !== 'event') continue;
      const event = effect.event;
      if (event.type === 'job.due' || event.type === 'job.submitted') counted++;
      // Expiries come before the ticks (and cancel the expired jobs' dependents).
      if (event.type === 'job.cancelled' && event.from !== 'SCHEDULED') counted--;
      if (event.type === 'schedule.fired' || event.type === 'schedule.skipped') {
        const fact = this.#onTick(
          event,
          h,
          event.type === 'schedule.fired' ? counted - 1 : counted,
        );
        if (fact !== null) facts.push(fact);
      }
    }
    return facts;
  }

  #onTick(
    event: Extract<CoreEvent, { type: 'schedule.fired' | 'schedule.skipped' }>,
    h: HandledInput,
    counted: number,
  ): TickFact | null {
    const judge = this.#judge;
    const m = this.#live.get(event.name);
    const what = `${event.type} ${event.name} tick ${event.tickMs}${event.type === 'schedule.skipped' ? ` (${event.reason})` : ''}`;
    judge.check(
      h.input.kind === 'tick' || h.input.kind === 'wake',
      () => `${what} on a ${h.input.kind} input`,
    );
    if (m === undefined) throw judge.violation(`${what}: no such schedule`);
    judge.check(!m.paused, () => `${what}: the schedule is paused`);
    judge.check(event.tickMs <= h.nowMs, () => `${what}: ahead of now (${h.nowMs})`);
    judge.check(
      m.lastTickMs === null || event.tickMs > m.lastTickMs,
      () => `${what}: not after its previous tick ${m.lastTickMs}`,
    );
    judge.check(onCadence(m, event.tickMs), () => `${what}: not on its cadence (${cadence(m)})`);
    const next = tickAfter(m, event.tickMs);
    judge.check(
      next === null || next > h.nowMs,
      () => `${what}: not the latest due tick, ${next} is due too at ${h.nowMs}`,
    );
    const beforeStart = event.tickMs < this.#termStartMs;
    const missed = beforeStart && m.catchUp === 'none';
    const last = m.lastJobId;
    const overlapping = m.overlap === 'skip' && last !== null && this.#terminal(last) === undefined;
    const atLimit = counted >= this.#maxActiveJobs;
    m.lastTickMs = event.tickMs;
    m.anchorMs = event.tickMs;
    if (event.type === 'schedule.skipped') {
      const expected = missed ? 'missed' : overlapping ? 'overlap' : atLimit ? 'limit' : null;
      judge.check(
        event.reason === expected,
        () =>
          `${what}, expected ${expected ?? 'a job'} (catchUp ${m.catchUp}, core started ${this.#termStartMs}, last job ${last} ${last === null ? '' : (this.#terminal(last) ?? 'active')}, ${counted} active of ${this.#maxActiveJobs})`,
      );
      if (event.reason === 'overlap') this.counts.skippedOverlap++;
      if (event.reason === 'missed') this.counts.skippedMissed++;
      if (event.reason === 'limit') this.counts.skippedLimit++;
      return null;
    }
    judge.check(
      !missed && !overlapping && !atLimit,
      () =>
        `${what} made job ${event.jobId}: missed ${missed}, overlapping ${overlapping} (last job ${last}), ${counted} active of ${this.#maxActiveJobs}`,
    );
    judge.check(
      event.lagMs === h.nowMs - event.tickMs,
      () => `${what}: lag ${event.lagMs} ms at ${h.nowMs}`,
    );
    if (beforeStart) {
      const key = `${m.name}/${m.createdAtMs}`;
      const n = (this.#catchUps.get(key) ?? 0) + 1;
      this.#catchUps.set(key, n);
      judge.check(
        n <= 1,
        () => `${what}: catch-up job #${n} since the core started at ${this.#termStartMs}`,
      );
      this.counts.catchUps++;
    }
    m.lastJobId = event.jobId;
    m.lastRunAtMs = event.tickMs;
    this.counts.fired++;
    return { name: m.name, generation: m.createdAtMs, tickMs: event.tickMs };
  }

  /** A trigger made job `jobId` now (judged by the request checks). */
  onTriggered(name: string, jobId: string, nowMs: number): void {
    const m = this.#live.get(name);
    if (m === undefined) return;
    m.lastJobId = jobId;
    m.lastRunAtMs = nowMs;
    this.counts.triggers++;
  }

  /** A SCHEDULE_INFO answered SET/PAUSE/RESUME_SCHEDULE (already judged): the model follows. */
  onInfo(snapshot: ScheduleSnapshot, nowMs: number): void {
    const before = this.#live.get(snapshot.name);
    const m: ModelSchedule = {
      name: snapshot.name,
      taskType: snapshot.taskType,
      cron: snapshot.cron,
      everyMs: snapshot.everyMillis,
      timezone: snapshot.timezone,
      payload: snapshot.payload,
      maxAttempts: snapshot.maxAttempts,
      priority: snapshot.priority,
      timeoutMs: snapshot.timeoutMillis,
      overlap: snapshot.overlap,
      catchUp: snapshot.catchUp,
      paused: snapshot.paused,
      queue: snapshot.queue ?? 'default',
      lastJobId: before?.lastJobId ?? null,
      lastRunAtMs: before?.lastRunAtMs ?? null,
      createdAtMs: before?.createdAtMs ?? nowMs,
      anchorMs: snapshot.nextRunAtMillis ?? before?.anchorMs ?? null,
      // A new or changed cadence starts after now; the bound kept after a
      // crash (the committed next tick) holds only for the old one.
      lastTickMs: Math.min(before?.lastTickMs ?? nowMs, nowMs),
    };
    this.#live.set(m.name, m);
  }

  onDeleted(name: string): void {
    this.#live.delete(name);
  }

  /** The batch holding these tick jobs committed. */
  onCommitted(ticks: ReadonlyMap<string, TickFact>): void {
    const judge = this.#judge;
    if (ticks.size === 0) return;
    const schedules = new Map(this.#store.committedSchedules().map((r) => [r.name, r]));
    for (const [jobId, fact] of ticks) {
      const what = `job ${jobId} of ${fact.name} tick ${fact.tickMs}`;
      const row = this.#store.committedJob(jobId);
      judge.check(
        row !== undefined && row.scheduleName === fact.name && row.runAtMs === fact.tickMs,
        () =>
          `${what} committed as ${row === undefined ? 'nothing' : `${row.scheduleName} at ${row.runAtMs}`}`,
      );
      const key = `${fact.name}/${fact.generation}/${fact.tickMs}`;
      const other = this.#committedTicks.get(key);
      judge.check(
        other === undefined,
        () => `${what}: the tick already made committed job ${other}`,
      );
      this.#committedTicks.set(key, jobId);
      // The schedule's advance past the tick commits with its job.
      const schedule = schedules.get(fact.name);
      if (schedule === undefined || schedule.createdAtMs !== fact.generation) continue;
      judge.check(
        schedule.nextRunAtMs === null || schedule.nextRunAtMs > fact.tickMs,
        () => `${what} committed, but the schedule's next tick is still ${schedule.nextRunAtMs}`,
      );
    }
  }
}

function fromRecord(row: Readonly<ScheduleRecord>): ModelSchedule {
  return {
    name: row.name,
    taskType: row.taskType,
    cron: row.cron,
    everyMs: row.everyMs,
    timezone: row.timezone,
    payload: JSON.parse(row.payloadJson) as JsonObject,
    maxAttempts: row.maxAttempts,
    priority: row.priority,
    timeoutMs: row.timeoutMs,
    overlap: row.overlap,
    catchUp: row.catchUp,
    paused: row.paused,
    queue: row.queue,
    lastJobId: row.lastJobId,
    lastRunAtMs: row.lastRunAtMs,
    createdAtMs: row.createdAtMs,
    anchorMs: row.nextRunAtMs,
    // Every tick before the committed next one was fired or skipped already.
    lastTickMs: row.nextRunAtMs === null ? null : row.nextRunAtMs - 1,
  };
}

/** The schedule's first tick after `afterMs` on its current cadence. */
function tickAfter(m: ModelSchedule, afterMs: number): number | null {
  if (m.everyMs !== null) {
    const anchor = m.anchorMs ?? afterMs;
    if (anchor > afterMs) return anchor;
    return anchor + (Math.floor((afterMs - anchor) / m.everyMs) + 1) * m.everyMs;
  }
  if (m.cron === null) return null;
  return CRON.next(m.cron, m.timezone ?? 'UTC', afterMs);
}

function onCadence(m: ModelSchedule, tickMs: number): boolean {
  if (m.everyMs !== null) return m.anchorMs === null || (tickMs - m.anchorMs) % m.everyMs === 0;
  if (m.cron === null) return false;
  return CRON.next(m.cron, m.timezone ?? 'UTC', tickMs - 1) === tickMs;
}

function cadence(m: ModelSchedule): string {
  return m.everyMs !== null
    ? `every ${m.everyMs} ms from ${m.anchorMs}`
    : `cron ${m.cron} ${m.timezone}`;
}

/** The tick facts of these effects' `schedule.fired` events, for #submissionOf. */
export function firedJob(
  effects: readonly Effect[],
  jobId: string,
): Extract<CoreEvent, { type: 'schedule.fired' }> | undefined {
  for (const e of effects) {
    if (e.kind === 'event' && e.event.type === 'schedule.fired' && e.event.jobId === jobId) {
      return e.event;
    }
  }
  return undefined;
}
