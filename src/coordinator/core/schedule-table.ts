/**
 * The schedules the core holds (schedules.ts has the rules), by name, with a
 * heap of their next ticks (lazily cleaned: an entry counts only while it is
 * still its schedule's next tick).
 */
import type { ScheduleRecord } from '../../store/store.js';
import { BinaryHeap } from './binary-heap.js';

/** A schedule's next tick in the heap (lazily cleaned: checked against the schedule). */
interface TickEntry {
  readonly atMs: number;
  readonly name: string;
}

/** The schedules the core holds, their next ticks, and the writes it owes the store. */
export class ScheduleTable {
  readonly #byName = new Map<string, ScheduleRecord>();
  readonly #ticks = new BinaryHeap<TickEntry>((a, b) => a.atMs < b.atMs);

  get size(): number {
    return this.#byName.size;
  }

  get(name: string): ScheduleRecord | undefined {
    return this.#byName.get(name);
  }

  /** Every schedule, sorted by name. */
  sorted(): ScheduleRecord[] {
    return [...this.#byName.values()].sort((a, b) =>
      a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
    );
  }

  /** Holds a schedule (new, changed or recovered); its next tick is armed. */
  put(schedule: ScheduleRecord): void {
    this.#byName.set(schedule.name, schedule);
    if (schedule.nextRunAtMs !== null) {
      this.#ticks.push({ atMs: schedule.nextRunAtMs, name: schedule.name });
    }
  }

  delete(name: string): void {
    this.#byName.delete(name);
  }

  /** The earliest armed tick (possibly stale: an early wake-up is harmless). */
  nextTickAtMs(): number | null {
    return this.#ticks.peek()?.atMs ?? null;
  }

  /** Takes the next schedule whose tick is due at `nowMs`, or undefined. */
  takeDue(nowMs: number): ScheduleRecord | undefined {
    for (
      let top = this.#ticks.peek();
      top !== undefined && top.atMs <= nowMs;
      top = this.#ticks.peek()
    ) {
      this.#ticks.pop();
      const schedule = this.#byName.get(top.name);
      if (schedule !== undefined && !schedule.paused && schedule.nextRunAtMs === top.atMs) {
        return schedule;
      }
    }
    return undefined;
  }
}
