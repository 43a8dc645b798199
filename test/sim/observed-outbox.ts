/**
 * The cluster's outbox of the sharded simulation: the real
 * {@link MemoryOutbox} the shards' stores share, watched as commits write
 * and delete its rows (only a commit does either), so that the checks
 * across shards (cross-shard-checks.ts) know every message that ever was.
 *
 * Checked as it happens: a commit deletes only messages that are there (a
 * message applied by two committed batches would be deleted twice), and a
 * job's end is told to a waiter once per time it was asked: a `parentEnded`
 * names the pair only after a `watch` of it (or a flow's watcher) written
 * since the last one did. A child asks once for its parent; a handler asks
 * again with each `ctx.waitFor` of the same job.
 */
import { MemoryOutbox } from '../../src/store/memory-store.js';
import type { JobRecord, OutboxBody, OutboxRow } from '../../src/store/store.js';
import type { Judge } from './violation.js';

type Body<T extends OutboxBody['type']> = Extract<OutboxBody, { type: T }>;

export interface OutboxCounts {
  createJobs: number;
  watch: number;
  parentEnded: number;
  /** Messages deleted by the batch that applied them. */
  applied: number;
}

export class ObservedOutbox extends MemoryOutbox {
  readonly #judge: Judge;
  /** Ids as MemoryOutbox gives them: in order of insertion, from 1. */
  #inserted = 0;
  /** Messages there now: id -> its row. */
  readonly #live = new Map<number, OutboxRow>();
  /** Messages deleted since {@link takeApplied} was last called. */
  #applied: OutboxRow[] = [];
  /** Jobs that `createJobs` messages carried: job id -> its row and the shard it was sent to. */
  readonly sentJobs = new Map<string, { row: JobRecord; shard: number }>();
  /** "parentId childId" -> the parent's end as it was told (the latest time). */
  readonly told = new Map<string, Body<'parentEnded'>>();
  /** "parentId childId" of the pairs watched and not told since. */
  readonly #asked = new Set<string>();
  readonly counts: OutboxCounts = { createJobs: 0, watch: 0, parentEnded: 0, applied: 0 };
  /** A planted bug (tests of the checks): the outbox loses every `createJobs` written. */
  readonly #losesJobs: boolean;

  constructor(judge: Judge, losesJobs = false) {
    super();
    this.#judge = judge;
    this.#losesJobs = losesJobs;
  }

  override insert(rows: readonly Readonly<OutboxRow>[]): void {
    const kept = this.#losesJobs ? rows.filter((row) => row.body.type !== 'createJobs') : rows;
    super.insert(kept);
    for (const row of rows) {
      const { targetShard, body } = row;
      if (kept.includes(row)) this.#live.set(++this.#inserted, row);
      this.counts[body.type]++;
      if (body.type === 'createJobs') {
        for (const row of body.jobs) this.sentJobs.set(row.jobId, { row, shard: targetShard });
        for (const w of body.watchers ?? []) this.#asked.add(`${w.parentId} ${w.childId}`);
      }
      if (body.type === 'watch') this.#asked.add(`${body.parentId} ${body.childId}`);
      if (body.type === 'parentEnded') this.#told(body);
    }
  }

  override delete(ids: readonly number[]): void {
    for (const id of ids) {
      const row = this.#live.get(id);
      this.#judge.check(
        row !== undefined,
        () => `outbox message ${id} was applied by a second committed batch`,
      );
      this.#live.delete(id);
      this.#applied.push(row as OutboxRow);
      this.counts.applied++;
    }
    super.delete(ids);
  }

  /** Messages there now. */
  get size(): number {
    return this.#live.size;
  }

  /** The messages applied (deleted by a commit) since the last call. */
  takeApplied(): OutboxRow[] {
    const applied = this.#applied;
    this.#applied = [];
    return applied;
  }

  /** True while a `createJobs` message carrying `jobId` is there (its job not made yet). */
  carries(jobId: string): boolean {
    for (const { body } of this.#live.values()) {
      if (body.type === 'createJobs' && body.jobs.some((job) => job.jobId === jobId)) return true;
    }
    return false;
  }

  #told(body: Body<'parentEnded'>): void {
    for (const childId of body.childIds) {
      const pair = `${body.parentId} ${childId}`;
      this.#judge.check(
        this.#asked.delete(pair),
        () =>
          `the end of ${body.parentId} was told ${this.told.has(pair) ? 'twice' : 'unasked'} to ${childId}`,
      );
      this.told.set(pair, body);
    }
  }
}
