/**
 * An in-memory {@link Store} for tests and the deterministic simulation.
 *
 * It models durability honestly: only committed rows survive
 * {@link MemoryStore.crash}, which is how the simulation restarts a
 * coordinator "from the store". {@link MemoryStore.failCommits} makes commits
 * throw, to test how a failed write is handled.
 */
import { isTerminalState } from '../protocol/messages.js';
import {
  PendingWrites,
  StoreError,
  mergeListed,
  type JobRecord,
  type ListQuery,
  type Store,
} from './store.js';

export class MemoryStore implements Store {
  readonly #committed = new Map<string, JobRecord>();
  readonly #byKey = new Map<string, string>();
  #pending = new PendingWrites();
  #failure: string | null = null;
  /** Number of successful commits that wrote something. */
  commits = 0;

  insertJob(job: Readonly<JobRecord>): void {
    this.#pending.insert(job);
  }

  updateJob(job: Readonly<JobRecord>): void {
    this.#pending.update(job);
  }

  get pendingCount(): number {
    return this.#pending.size;
  }

  commit(): void {
    if (this.#pending.size === 0) return;
    if (this.#failure !== null) throw new StoreError(`commit failed: ${this.#failure}`);
    for (const { job, isNew } of this.#pending.entries()) {
      if (isNew === this.#committed.has(job.jobId)) {
        throw new StoreError(
          `${isNew ? 'insert of existing' : 'update of missing'} job ${job.jobId}`,
        );
      }
      this.#committed.set(job.jobId, job);
      if (job.idempotencyKey !== null) this.#byKey.set(job.idempotencyKey, job.jobId);
    }
    this.#pending.clear();
    this.commits++;
  }

  getJob(jobId: string): Readonly<JobRecord> | undefined {
    const job = this.#pending.get(jobId) ?? this.#committed.get(jobId);
    return job === undefined ? undefined : { ...job };
  }

  getJobByIdempotencyKey(key: string): Readonly<JobRecord> | undefined {
    const staged = this.#pending.getByKey(key);
    if (staged !== undefined) return { ...staged };
    const jobId = this.#byKey.get(key);
    return jobId === undefined ? undefined : this.getJob(jobId);
  }

  loadActiveJobs(): JobRecord[] {
    return [...this.#committed.values()]
      .filter((job) => !isTerminalState(job.state))
      .sort((a, b) => a.seq - b.seq)
      .map((job) => ({ ...job }));
  }

  maxSeq(): number {
    let max = 0;
    for (const job of this.#committed.values()) max = Math.max(max, job.seq);
    for (const { job } of this.#pending.entries()) max = Math.max(max, job.seq);
    return max;
  }

  listJobs(query: ListQuery): Readonly<JobRecord>[] {
    const committed = [...this.#committed.values()]
      .filter((job) => query.beforeSeq === null || job.seq < query.beforeSeq)
      .filter((job) => query.state === null || job.state === query.state)
      .sort((a, b) => b.seq - a.seq)
      .slice(0, query.limit + this.#pending.size);
    return mergeListed(committed, this.#pending, query).map((job) => ({ ...job }));
  }

  close(): void {}

  /** Forgets everything not committed, as a process crash would. */
  crash(): void {
    this.#pending = new PendingWrites();
  }

  /** Makes every later commit throw (null: commits work again). */
  failCommits(reason: string | null): void {
    this.#failure = reason;
  }

  /** Committed rows (a copy), for invariant checks. */
  committedJobs(): JobRecord[] {
    return [...this.#committed.values()].map((job) => ({ ...job }));
  }
}
