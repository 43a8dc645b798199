/**
 * Invariants of named queues, checked after every input the leader handles:
 * - a paused queue starts nothing;
 * - an input that starts an attempt of a queue leaves at most its
 *   concurrency of the queue's attempts leased (and of each group at most
 *   the group concurrency): a limit may be lowered below what runs (nothing
 *   is revoked), but nothing starts above it;
 * - no window `[t, t + interval)` holds more starts of a queue (of a group)
 *   than its rate, across restarts and failovers too (windows start full).
 * Start histories are kept per rate setting: a changed rate starts a new one.
 */
import type { CoordinatorCore } from '../../src/coordinator/core/core.js';
import type { QueueSettings } from '../../src/coordinator/core/queue-table.js';
import type { RateLimit } from '../../src/protocol/messages.js';
import type { JobRecord } from '../../src/store/store.js';
import type { Judge } from './violation.js';
import type { HandledInput } from './world.js';

interface History {
  rateKey: string;
  starts: number[];
}

export class QueueChecks {
  readonly #judge: Judge;
  readonly #history = new Map<string, History>();
  /** Attempt starts checked, and those of a limited queue (the simulation's coverage). */
  starts = 0;
  limitedStarts = 0;

  constructor(judge: Judge) {
    this.#judge = judge;
  }

  onHandled(handled: HandledInput, nowMs: number, core: CoordinatorCore): void {
    const assigned = new Set<string>();
    for (const e of handled.effects) {
      if (e.kind === 'send' && e.msg.type === 'TASK_ASSIGN') assigned.add(e.msg.jobId);
    }
    if (assigned.size === 0) return;
    const view = core.inspect();
    const active = core.activeJobs();
    const settings = new Map(view.queues.map((q) => [q.name, q.settings]));
    const leased = new Map<string, number>();
    const leasedByGroup = new Map<string, number>();
    for (const job of active) {
      if (job.state !== 'RUNNING') continue;
      leased.set(job.queue, (leased.get(job.queue) ?? 0) + 1);
      const g = `${job.queue}\t${job.groupKey ?? ''}`;
      leasedByGroup.set(g, (leasedByGroup.get(g) ?? 0) + 1);
    }
    for (const job of active) {
      if (!assigned.has(job.jobId) || job.state !== 'RUNNING') continue;
      this.starts++;
      const s = settings.get(job.queue);
      if (s === undefined) continue;
      const limited =
        s.concurrency !== null ||
        s.rate !== null ||
        s.groupConcurrency !== null ||
        s.groupRate !== null;
      if (limited) this.limitedStarts++;
      this.#checkStart(job, s, nowMs, leased, leasedByGroup);
    }
  }

  #checkStart(
    job: JobRecord,
    s: QueueSettings,
    nowMs: number,
    leased: Map<string, number>,
    leasedByGroup: Map<string, number>,
  ): void {
    const judge = this.#judge;
    const group = `${job.queue}\t${job.groupKey ?? ''}`;
    judge.check(!s.paused, () => `job ${job.jobId} of paused queue ${job.queue} started`);
    const n = leased.get(job.queue) ?? 0;
    judge.check(
      s.concurrency === null || n <= s.concurrency,
      () => `queue ${job.queue}: ${n} leased after a start, concurrency ${s.concurrency}`,
    );
    const g = leasedByGroup.get(group) ?? 0;
    judge.check(
      s.groupConcurrency === null || g <= s.groupConcurrency,
      () => `group ${group}: ${g} leased after a start, group concurrency ${s.groupConcurrency}`,
    );
    this.#checkRate(`q\t${job.queue}`, s.rate, nowMs);
    this.#checkRate(`g\t${group}`, s.groupRate, nowMs);
  }

  #checkRate(key: string, rate: RateLimit | null, nowMs: number): void {
    if (rate === null) return;
    const rateKey = `${rate.max}/${rate.intervalMillis}`;
    let h = this.#history.get(key);
    if (h === undefined || h.rateKey !== rateKey) {
      h = { rateKey, starts: [] };
      this.#history.set(key, h);
    }
    h.starts.push(nowMs);
    while ((h.starts[0] as number) <= nowMs - rate.intervalMillis) h.starts.shift();
    const count = h.starts.length;
    this.#judge.check(
      count <= rate.max,
      () => `${key}: ${count} starts within ${rate.intervalMillis} ms, rate ${rateKey}`,
    );
  }
}
