/**
 * Recurring schedules: named definitions that make one job per due tick.
 *
 * Each schedule is held in memory (they are few) and in the store. A tick's
 * job and the schedule's advance to its next tick are written in the same
 * batch, so they commit together or not at all: a coordinator killed at any
 * point has either made the tick's job and moved on, or done neither, and a
 * restarted or newly elected one resumes from what the store says. No tick
 * ever makes two jobs.
 *
 * Due ticks fire at the start of an input (like due delayed jobs); the
 * earliest next tick is part of the core's wake-up. Ticks that passed
 * together (a stall, an outage) collapse into the latest of them: one job.
 * A tick that fell due before this core started was missed while no
 * coordinator led: `catchUp: latest` makes its job, `none` skips it. With
 * `overlap: skip` a tick whose previous job is not terminal makes none.
 * Ticks are computed by the injected {@link CronEvaluator} (cron) or by
 * adding the interval; a paused schedule has no next tick, and resuming
 * starts from the first tick after now.
 */
import type { ScheduleRecord } from '../../store/store.js';
import type { CoreState } from './state.js';

/** The first tick of `schedule` strictly after `afterMs`; null when there is none. */
export function tickAfter(s: CoreState, schedule: ScheduleRecord, afterMs: number): number | null {
  if (schedule.everyMs !== null) {
    // Interval ticks keep their phase: the current tick plus whole intervals.
    const base = schedule.nextRunAtMs ?? afterMs;
    if (base > afterMs) return base;
    const steps = Math.floor((afterMs - base) / schedule.everyMs) + 1;
    return base + steps * schedule.everyMs;
  }
  if (schedule.cron === null) return null;
  return s.deps.cron.next(schedule.cron, schedule.timezone ?? 'UTC', afterMs);
}

/** The first tick after now for a schedule that starts (set, resumed): an interval starts now. */
export function firstTick(s: CoreState, schedule: ScheduleRecord): number | null {
  if (schedule.paused) return null;
  if (schedule.everyMs !== null) return s.nowMs + schedule.everyMs;
  if (schedule.cron === null) return null;
  return s.deps.cron.next(schedule.cron, schedule.timezone ?? 'UTC', s.nowMs);
}

/**
 * The latest tick at or before `nowMs`, starting from a due tick `dueMs`
 * (ticks that passed together collapse into it). Bounded: a cron that ticks
 * every second and was due a day ago is walked from near now, not from then.
 */
export function latestDueTick(
  s: CoreState,
  schedule: ScheduleRecord,
  dueMs: number,
  nowMs: number,
): number {
  if (schedule.everyMs !== null) {
    return dueMs + Math.floor((nowMs - dueMs) / schedule.everyMs) * schedule.everyMs;
  }
  let from = dueMs;
  // Start from a recent window that holds a tick, smallest first.
  for (const backMs of [1_000, 60_000, 3_600_000, 86_400_000, 32 * 86_400_000]) {
    if (nowMs - backMs <= dueMs) break;
    const probe = tickAfter(s, schedule, nowMs - backMs - 1);
    if (probe !== null && probe <= nowMs) {
      from = probe;
      break;
    }
  }
  let latest = from;
  for (let i = 0; i < 100_000; i++) {
    const next = tickAfter(s, schedule, latest);
    if (next === null || next > nowMs) break;
    latest = next;
  }
  return latest;
}
