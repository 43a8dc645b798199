/**
 * Named queues: their settings (paused, concurrency, rate, and the same per
 * group key) and the counters the limits are checked against.
 *
 * Each limit is a small structure with one owner here:
 * - concurrency: a count of the attempts of the queue (and of each group)
 *   that hold a lease, prefetched ones included, raised at assignment and
 *   lowered when the attempt ends ({@link QueueTable.noteStart} /
 *   {@link QueueTable.noteEnd});
 * - rate: a {@link StartWindow} per queue (and per group) holding the start
 *   times that can still matter, so "may one more start now?" and "when may
 *   the next one start?" cost O(1) amortised.
 *
 * A queue has state here only while it has a setting, a leased attempt or
 * start times that still count (rates count starts from when they are set): a queue or group that has none costs
 * nothing. Jobs without a group key form one group of their own (key '').
 * A lower limit never revokes an attempt: it only holds back new starts.
 */
import type { QueueInfo, RateLimit } from '../../protocol/messages.js';
import type { QueueSettingsRecord } from '../../store/store.js';

/** The group of the jobs without a key (a real key has at least one character). */
export const NO_GROUP = '';

export interface QueueSettings {
  paused: boolean;
  concurrency: number | null;
  rate: RateLimit | null;
  groupConcurrency: number | null;
  groupRate: RateLimit | null;
}

const NO_SETTINGS: Readonly<QueueSettings> = {
  paused: false,
  concurrency: null,
  rate: null,
  groupConcurrency: null,
  groupRate: null,
};

/**
 * Attempt start times, oldest first, for a sliding window: at most `max`
 * starts in any half-open window `[t, t + interval)`. Times that can no
 * longer fall into a window with a start now are dropped as they are met.
 */
export class StartWindow {
  #times: number[] = [];
  #head = 0;

  get size(): number {
    return this.#times.length - this.#head;
  }

  record(atMs: number): void {
    this.#times.push(atMs);
  }

  /** Starts that share a window with a start at `nowMs` (those after `nowMs - interval`). */
  count(nowMs: number, intervalMs: number): number {
    const times = this.#times;
    while (this.#head < times.length && (times[this.#head] as number) <= nowMs - intervalMs) {
      this.#head++;
    }
    if (this.#head > 64 && this.#head * 2 > times.length) {
      this.#times = times.slice(this.#head);
      this.#head = 0;
    }
    return this.size;
  }

  /** The earliest time at or after `nowMs` at which one more start keeps the limit. */
  nextOpeningMs(nowMs: number, rate: RateLimit): number {
    const n = this.count(nowMs, rate.intervalMillis);
    if (n < rate.max) return nowMs;
    // The (n - max + 1)-th oldest start must leave the window first.
    const leaving = this.#times[this.#head + n - rate.max] as number;
    return leaving + rate.intervalMillis;
  }
}

interface Counters {
  /** Attempts holding a lease now. */
  leased: number;
  readonly starts: StartWindow;
}

export interface QueueState extends Counters {
  readonly name: string;
  settings: QueueSettings;
  /** True once a setting was stored (the queue is listed even without jobs). */
  stored: boolean;
  /**
   * After a restart or failover the starts of the previous term are not
   * known: the queue's rate (and each group's) allows no start before this.
   */
  rateHeldUntilMs: number;
  groupRateHeldUntilMs: number;
  readonly groups: Map<string, Counters>;
  /** A handler held the whole queue back until then (RateLimitedError, scope `queue`); 0 = never. */
  heldUntilMs: number;
  /** Groups a handler held back (scope `group`), until when; ended ones are dropped as met. */
  readonly heldGroups: Map<string, number>;
}

const newCounters = (): Counters => ({ leased: 0, starts: new StartWindow() });

export class QueueTable {
  readonly #queues = new Map<string, QueueState>();

  /** Queues with state here (settings, leases or counted starts). */
  get size(): number {
    return this.#queues.size;
  }

  get(name: string): QueueState | undefined {
    return this.#queues.get(name);
  }

  values(): IterableIterator<QueueState> {
    return this.#queues.values();
  }

  settingsOf(name: string): Readonly<QueueSettings> {
    return this.#queues.get(name)?.settings ?? NO_SETTINGS;
  }

  /**
   * Restores stored settings (recovery). The starts of the term before are
   * unknown, so each rate window starts full: conservative, never a burst
   * above the limit, at the price of one interval without starts.
   */
  load(record: Readonly<QueueSettingsRecord>, nowMs: number): void {
    const q = this.#ensure(record.name);
    q.settings = settingsFromRecord(record);
    q.stored = true;
    q.heldUntilMs = record.heldUntilMs ?? 0;
    if (q.settings.rate !== null) q.rateHeldUntilMs = nowMs + q.settings.rate.intervalMillis;
    if (q.settings.groupRate !== null) {
      q.groupRateHeldUntilMs = nowMs + q.settings.groupRate.intervalMillis;
    }
  }

  /** Replaces a queue's settings; returns the row to store. */
  set(name: string, settings: QueueSettings, nowMs: number): QueueSettingsRecord {
    const q = this.#ensure(name);
    q.settings = { ...settings };
    q.stored = true;
    return recordOf(name, q.settings, nowMs, q.heldUntilMs);
  }

  /**
   * A handler held the whole queue back until `untilMs` (a later hold wins);
   * returns the queue's row to store, or null when an existing hold already
   * reaches that far.
   */
  holdQueue(name: string, untilMs: number, nowMs: number): QueueSettingsRecord | null {
    const q = this.#ensure(name);
    if (q.heldUntilMs >= untilMs) return null;
    q.heldUntilMs = untilMs;
    q.stored = true;
    return recordOf(name, q.settings, nowMs, untilMs);
  }

  /**
   * A handler held one group back until `untilMs` (a later hold wins);
   * returns true when that changed the hold (it is to be stored). `group`
   * null = the jobs without a key. An ended hold is not taken (recovery).
   */
  holdGroup(name: string, group: string | null, untilMs: number, nowMs: number): boolean {
    if (untilMs <= nowMs) return false;
    const q = this.#ensure(name);
    const key = group ?? NO_GROUP;
    if ((q.heldGroups.get(key) ?? 0) >= untilMs) return false;
    q.heldGroups.set(key, untilMs);
    return true;
  }

  /** Until when a handler holds the queue back, or null when it does not at `nowMs`. */
  heldUntil(name: string, nowMs: number): number | null {
    const at = this.#queues.get(name)?.heldUntilMs ?? 0;
    return at > nowMs ? at : null;
  }

  /** The groups of the queue a handler holds back at `nowMs`, soonest end first, at most `limit`. */
  heldGroups(name: string, nowMs: number, limit: number): { group: string; untilMs: number }[] {
    const q = this.#queues.get(name);
    if (q === undefined) return [];
    const held: { group: string; untilMs: number }[] = [];
    for (const [group, untilMs] of q.heldGroups) if (untilMs > nowMs) held.push({ group, untilMs });
    held.sort((a, b) => a.untilMs - b.untilMs);
    return held.slice(0, limit);
  }

  /** Group holds at `nowMs` over every queue (the simulation's check). */
  *groupHolds(nowMs: number): IterableIterator<{ queue: string; group: string; untilMs: number }> {
    for (const q of this.#queues.values()) {
      for (const [group, untilMs] of q.heldGroups) {
        if (untilMs > nowMs) yield { queue: q.name, group, untilMs };
      }
    }
  }

  /** Forgets the group holds that ended by `nowMs`; returns how many. */
  dropEndedHolds(nowMs: number): number {
    let dropped = 0;
    for (const q of this.#queues.values()) {
      for (const [group, untilMs] of q.heldGroups) {
        if (untilMs > nowMs) continue;
        q.heldGroups.delete(group);
        dropped++;
      }
      this.#dropIfIdle(q);
    }
    return dropped;
  }

  /**
   * Why nothing of this queue may start at `nowMs` ('paused', 'concurrency',
   * 'rate'), or null when one more attempt may start.
   */
  queueBlock(name: string, nowMs: number): 'paused' | 'concurrency' | 'rate' | null {
    const q = this.#queues.get(name);
    if (q === undefined) return null;
    const { paused, concurrency, rate } = q.settings;
    if (paused) return 'paused';
    // A handler's hold waits like a rate: the ready queue wakes at its end.
    if (nowMs < q.heldUntilMs) return 'rate';
    if (concurrency !== null && q.leased >= concurrency) return 'concurrency';
    if (rate !== null && nowMs < q.rateHeldUntilMs) return 'rate';
    if (rate !== null && q.starts.count(nowMs, rate.intervalMillis) >= rate.max) return 'rate';
    return null;
  }

  /** Why nothing of this group may start now ('concurrency', 'rate'), or null. */
  groupBlock(name: string, group: string, nowMs: number): 'concurrency' | 'rate' | null {
    const q = this.#queues.get(name);
    if (q === undefined) return null;
    if (nowMs < (q.heldGroups.get(group) ?? 0)) return 'rate';
    const { groupConcurrency, groupRate } = q.settings;
    if (groupConcurrency === null && groupRate === null) return null;
    if (groupRate !== null && nowMs < q.groupRateHeldUntilMs) return 'rate';
    const g = q.groups.get(group);
    if (g === undefined) return null;
    if (groupConcurrency !== null && g.leased >= groupConcurrency) return 'concurrency';
    if (groupRate !== null && g.starts.count(nowMs, groupRate.intervalMillis) >= groupRate.max) {
      return 'rate';
    }
    return null;
  }

  /**
   * When this group's rate allows its next start (`nowMs` when it does now);
   * null when the group is held by its concurrency (a lease must end first).
   */
  groupOpeningMs(name: string, group: string, nowMs: number): number | null {
    const q = this.#queues.get(name);
    if (q === undefined) return nowMs;
    const opening = this.#limitOpeningMs(q, group, nowMs);
    if (q.heldGroups.size === 0 || opening === null) return opening;
    const heldUntilMs = q.heldGroups.get(group) ?? 0;
    if (heldUntilMs <= nowMs) {
      if (heldUntilMs > 0) q.heldGroups.delete(group);
      return opening;
    }
    return Math.max(opening, heldUntilMs);
  }

  /** {@link groupOpeningMs} by the group limits alone. */
  #limitOpeningMs(q: QueueState, group: string, nowMs: number): number | null {
    const { groupConcurrency, groupRate } = q.settings;
    if (groupRate !== null && nowMs < q.groupRateHeldUntilMs) return q.groupRateHeldUntilMs;
    const g = q.groups.get(group);
    if (g === undefined) return nowMs;
    if (groupConcurrency !== null && g.leased >= groupConcurrency) return null;
    return groupRate === null ? nowMs : g.starts.nextOpeningMs(nowMs, groupRate);
  }

  /** When the queue, held by its rate at `nowMs`, may start again; null when its rate does not hold it. */
  queueOpeningMs(name: string, nowMs: number): number | null {
    const q = this.#queues.get(name);
    if (q === undefined) return null;
    const rate = q.settings.rate;
    const byRate =
      rate === null ? 0 : Math.max(q.rateHeldUntilMs, q.starts.nextOpeningMs(nowMs, rate));
    const at = Math.max(byRate, q.heldUntilMs);
    return at > nowMs ? at : null;
  }

  /**
   * The earliest time after `nowMs` at which a queue held only by its rate
   * may start again; null when none is. (The core's wake-up uses the ready
   * queue's record of the openings it met instead: it does not move with
   * the clock alone.)
   */
  nextOpeningMs(nowMs: number): number | null {
    let next: number | null = null;
    for (const q of this.#queues.values()) {
      const rate = q.settings.rate;
      if (rate === null || q.settings.paused) continue;
      const at = Math.max(q.rateHeldUntilMs, q.starts.nextOpeningMs(nowMs, rate));
      if (at > nowMs && (next === null || at < next)) next = at;
    }
    return next;
  }

  /** An attempt of the queue started (assignment): it holds a lease and counts for the rate. */
  noteStart(name: string, group: string, nowMs: number, countsForRate = true): void {
    const q = this.#ensure(name);
    q.leased++;
    if (countsForRate && q.settings.rate !== null) q.starts.record(nowMs);
    // Leases are counted per group whether or not a group limit is set, so a
    // limit set later counts the attempts already running.
    let g = q.groups.get(group);
    if (g === undefined) q.groups.set(group, (g = newCounters()));
    g.leased++;
    if (countsForRate && q.settings.groupRate !== null) g.starts.record(nowMs);
  }

  /** An attempt of the queue ended: its lease no longer counts. */
  noteEnd(name: string, group: string): void {
    const q = this.#queues.get(name);
    if (q === undefined || q.leased <= 0) throw new Error(`queue ${name} has no leased attempt`);
    q.leased--;
    const g = q.groups.get(group);
    if (g !== undefined && g.leased > 0) {
      g.leased--;
      if (g.leased === 0 && g.starts.size === 0) q.groups.delete(group);
    }
    this.#dropIfIdle(q);
  }

  /** Attempts of the queue holding a lease now. */
  leasedIn(name: string): number {
    return this.#queues.get(name)?.leased ?? 0;
  }

  #ensure(name: string): QueueState {
    let q = this.#queues.get(name);
    if (q === undefined) {
      q = {
        name,
        settings: { ...NO_SETTINGS },
        stored: false,
        rateHeldUntilMs: 0,
        groupRateHeldUntilMs: 0,
        leased: 0,
        starts: new StartWindow(),
        groups: new Map(),
        heldUntilMs: 0,
        heldGroups: new Map(),
      };
      this.#queues.set(name, q);
    }
    return q;
  }

  #dropIfIdle(q: QueueState): void {
    if (!q.stored && q.leased === 0 && q.groups.size === 0 && q.heldGroups.size === 0) {
      this.#queues.delete(q.name);
    }
  }
}

function rateOf(max: number | null, intervalMs: number | null): RateLimit | null {
  return max === null || intervalMs === null ? null : { max, intervalMillis: intervalMs };
}

export function settingsFromRecord(r: Readonly<QueueSettingsRecord>): QueueSettings {
  return {
    paused: r.paused,
    concurrency: r.concurrency,
    rate: rateOf(r.rateMax, r.rateIntervalMs),
    groupConcurrency: r.groupConcurrency,
    groupRate: rateOf(r.groupRateMax, r.groupRateIntervalMs),
  };
}

export function recordOf(
  name: string,
  s: Readonly<QueueSettings>,
  updatedAtMs: number,
  heldUntilMs = 0,
): QueueSettingsRecord {
  return {
    name,
    paused: s.paused,
    concurrency: s.concurrency,
    rateMax: s.rate?.max ?? null,
    rateIntervalMs: s.rate?.intervalMillis ?? null,
    groupConcurrency: s.groupConcurrency,
    groupRateMax: s.groupRate?.max ?? null,
    groupRateIntervalMs: s.groupRate?.intervalMillis ?? null,
    updatedAtMs,
    heldUntilMs: heldUntilMs > 0 ? heldUntilMs : null,
  };
}

/** A queue's settings as the wire shows them (counts filled in by the caller). */
export function queueInfoOf(name: string, s: Readonly<QueueSettings>): QueueInfo {
  return {
    name,
    paused: s.paused,
    concurrency: s.concurrency,
    rateLimit: s.rate === null ? null : { ...s.rate },
    groupConcurrency: s.groupConcurrency,
    groupRateLimit: s.groupRate === null ? null : { ...s.groupRate },
    counts: {},
  };
}
