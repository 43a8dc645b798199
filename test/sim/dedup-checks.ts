/**
 * Deduplication keys (`dedupKey`), judged at each decision the core makes,
 * in the order it makes them within an input, against a model of the keyed
 * jobs the live core knows.
 *
 * The model holds, per queue and key, the keyed jobs in order of creation
 * (the last one is the key's job). Like the tracker's live facts it follows
 * what the core does, uncommitted writes included, and after a crash it is
 * rebuilt from the committed rows: a key's job whose submission was never
 * acknowledged (its batch lost) never existed. Whether a job is live and how
 * many attempts it had come from the tracker.
 *
 * The rules (the key's job, its "holder", is the latest created of its
 * jobs that is live or, ended, within the throttle window its own creation
 * opened — the same before and after a restart):
 * - a submission that creates a job in `active` mode finds no live job of
 *   its queue and key at all ("a key never has two live jobs in active
 *   mode"); one in `throttle` mode finds no holder created within its
 *   window; one in `debounce` mode finds no holder that is SCHEDULED and
 *   never started;
 * - a submission answered `deduplicated: true` names a job of its queue and
 *   key: for `active` the latest live one, for `throttle` the holder,
 *   created within the submission's window, for `debounce` the holder,
 *   SCHEDULED and never started, which takes the new payload and run time
 *   (`replaced: true`); the payload an attempt gets is the last one given.
 * The simulation never reruns jobs (a rerun job would be live again without
 * a submission: outside these rules). Keys of mixed modes (`m0`) follow the
 * same rules; the pool's other keys always use one mode and window, where
 * the holder rule is exactly the spec's.
 */
import { isDeepStrictEqual } from 'node:util';
import type { CoreEvent } from '../../src/coordinator/core/types.js';
import type { DedupMode, JobSnapshot, SubmitJob } from '../../src/protocol/messages.js';
import type { JobRecord } from '../../src/store/store.js';
import type { Judge } from './violation.js';

interface KeyedJob {
  readonly jobId: string;
  readonly queue: string;
  readonly key: string;
  readonly mode: DedupMode;
  readonly createdAtMs: number;
  /** `throttle`: the end of the window its creation opened; null = none. */
  readonly untilMs: number | null;
  payload: unknown;
  /** SCHEDULED and not yet due (a debounced submission may replace it then). */
  scheduled: boolean;
}

/** What the tracker knows of a job now (after the effects before the one being judged). */
export interface JobFacts {
  live(jobId: string): boolean;
  attempts(jobId: string): number;
}

/** A reply element that named a job its dedup key matched, with its submission. */
export interface DedupAnswer {
  readonly jobId: string;
  readonly replaced: boolean;
  readonly submission: SubmitJob;
  readonly snapshot: JobSnapshot | null;
  consumed: boolean;
}

const indexKey = (queue: string, key: string): string => `${queue}\u0000${key}`;

export class DedupChecks {
  readonly #judge: Judge;
  readonly #facts: JobFacts;
  readonly #byKey = new Map<string, KeyedJob[]>();
  readonly #jobs = new Map<string, KeyedJob>();
  readonly counts = { created: 0, matched: 0, replaced: 0 };

  constructor(judge: Judge, facts: JobFacts) {
    this.#judge = judge;
    this.#facts = facts;
  }

  /** After a crash: the keyed jobs of the committed rows, oldest first. */
  rebuild(rows: readonly Readonly<JobRecord>[]): void {
    this.#byKey.clear();
    this.#jobs.clear();
    const keyed = rows.filter((row) => row.dedupKey != null).sort((a, b) => a.seq - b.seq);
    for (const row of keyed) {
      this.#add({
        jobId: row.jobId,
        queue: row.queue,
        key: row.dedupKey as string,
        mode: row.dedupMode ?? 'active',
        createdAtMs: row.createdAtMs,
        untilMs: row.dedupUntilMs ?? null,
        payload: JSON.parse(row.payloadJson) as unknown,
        scheduled: row.state === 'SCHEDULED',
      });
    }
  }

  /** A job was created by `submission` at `nowMs` (a keyed one is judged and becomes its key's job). */
  onCreated(
    event: Extract<CoreEvent, { type: 'job.submitted' }>,
    submission: SubmitJob,
    nowMs: number,
  ): void {
    const key = submission.dedupKey ?? null;
    if (key === null) return;
    const mode = submission.dedupMode ?? 'active';
    const queue = submission.queue ?? 'default';
    const list = this.#byKey.get(indexKey(queue, key)) ?? [];
    const holder = this.#holderOf(list, nowMs);
    const what = (): string =>
      `${mode} submission with key ${queue}/${key} created ${event.jobId} at ${nowMs}`;
    switch (mode) {
      case 'active': {
        const live = list.filter((job) => this.#facts.live(job.jobId)).map((job) => job.jobId);
        this.#judge.check(live.length === 0, () => `${what()} while ${live.join(', ')} live`);
        break;
      }
      case 'throttle': {
        const windowMs = submission.dedupWindowMillis as number;
        this.#judge.check(
          holder === undefined || holder.createdAtMs + windowMs <= nowMs,
          () =>
            `${what()} within its window of ${windowMs} ms after ${holder?.jobId} (created ${holder?.createdAtMs})`,
        );
        break;
      }
      case 'debounce':
        this.#judge.check(
          holder === undefined || !this.#replaceable(holder),
          () => `${what()} while ${holder?.jobId} is SCHEDULED and never started`,
        );
        break;
    }
    this.counts.created++;
    this.#add({
      jobId: event.jobId,
      queue,
      key,
      mode,
      createdAtMs: nowMs,
      untilMs: mode === 'throttle' ? nowMs + (submission.dedupWindowMillis as number) : null,
      payload: JSON.parse(JSON.stringify(submission.payload)) as unknown,
      scheduled: event.state === 'SCHEDULED',
    });
  }

  /** A keyed submission created nothing: its key's job answered (`answer`: the reply that says so). */
  onMatched(
    event: Extract<CoreEvent, { type: 'job.dedupMatched' }>,
    answer: DedupAnswer | undefined,
    nowMs: number,
  ): void {
    const judge = this.#judge;
    const job = this.#jobs.get(event.jobId);
    const submission = answer?.submission;
    const what = (): string =>
      `${event.mode} submission with key ${submission?.queue ?? 'default'}/${event.dedupKey} at ${nowMs} named ${event.jobId}`;
    if (job === undefined || answer === undefined || submission === undefined) {
      throw judge.violation(
        `${what()}: ${job === undefined ? 'not a keyed job the model knows' : 'no reply says so'}`,
      );
    }
    this.counts.matched++;
    judge.check(
      job.key === event.dedupKey &&
        submission.dedupKey === event.dedupKey &&
        job.queue === (submission.queue ?? 'default') &&
        event.mode === (submission.dedupMode ?? 'active') &&
        answer.jobId === event.jobId &&
        answer.replaced === event.replaced,
      () => `${what()}, a job of ${job.queue}/${job.key} (reply ${JSON.stringify(answer)})`,
    );
    const list = this.#byKey.get(indexKey(job.queue, job.key)) ?? [];
    const holder = this.#holderOf(list, nowMs);
    switch (event.mode) {
      case 'active': {
        const live = list.filter((j) => this.#facts.live(j.jobId));
        judge.check(
          live.at(-1)?.jobId === event.jobId && !event.replaced,
          () => `${what()}; the live jobs of the key are ${live.map((j) => j.jobId).join(', ')}`,
        );
        break;
      }
      case 'throttle': {
        const windowMs = submission.dedupWindowMillis as number;
        judge.check(
          holder?.jobId === event.jobId && job.createdAtMs + windowMs > nowMs && !event.replaced,
          () =>
            `${what()} (created ${job.createdAtMs}, window ${windowMs} ms); the key's job is ${holder?.jobId}`,
        );
        break;
      }
      case 'debounce': {
        judge.check(
          holder?.jobId === event.jobId && this.#replaceable(job) && event.replaced,
          () =>
            `${what()}; it is ${this.#facts.live(job.jobId) ? 'live' : 'ended'}, ${job.scheduled ? 'scheduled' : 'due'}, ${this.#facts.attempts(job.jobId)} attempts; the key's job is ${holder?.jobId}`,
        );
        job.payload = JSON.parse(JSON.stringify(submission.payload)) as unknown;
        const runAtMs = Math.max(submission.runAtMillis ?? nowMs, nowMs);
        const snap = answer.snapshot;
        judge.check(
          snap === null ||
            (snap.state === 'SCHEDULED' && snap.attempts === 0 && snap.runAtMillis === runAtMs),
          () => `${what()}: replaced, it shows ${JSON.stringify(snap)}; due at ${runAtMs}`,
        );
        this.counts.replaced++;
        break;
      }
    }
    const snap = answer.snapshot;
    judge.check(
      snap === null ||
        (snap.jobId === event.jobId &&
          snap.dedupKey === job.key &&
          snap.dedupMode === job.mode &&
          (snap.queue ?? 'default') === job.queue),
      () => `${what()}: its snapshot ${JSON.stringify(snap)}`,
    );
  }

  /** The job fell due, or an attempt of it started: no longer replaceable. */
  onDue(jobId: string): void {
    const job = this.#jobs.get(jobId);
    if (job !== undefined) job.scheduled = false;
  }

  /** An attempt was assigned with `payload`: a keyed job runs with the last payload given. */
  onAssigned(jobId: string, payload: unknown): void {
    const job = this.#jobs.get(jobId);
    if (job === undefined) return;
    job.scheduled = false;
    this.#judge.check(
      isDeepStrictEqual(payload, job.payload),
      () =>
        `keyed job ${jobId} assigned with payload ${JSON.stringify(payload)}, its last is ${JSON.stringify(job.payload)}`,
    );
  }

  /** The key's job: the latest created that is live, or ended within its own throttle window. */
  #holderOf(list: readonly KeyedJob[], nowMs: number): KeyedJob | undefined {
    for (let i = list.length - 1; i >= 0; i--) {
      const job = list[i] as KeyedJob;
      if (this.#facts.live(job.jobId) || (job.untilMs !== null && job.untilMs > nowMs)) return job;
    }
    return undefined;
  }

  #replaceable(job: KeyedJob): boolean {
    return this.#facts.live(job.jobId) && job.scheduled && this.#facts.attempts(job.jobId) === 0;
  }

  #add(job: KeyedJob): void {
    const id = indexKey(job.queue, job.key);
    const list = this.#byKey.get(id) ?? [];
    list.push(job);
    this.#byKey.set(id, list);
    this.#jobs.set(job.jobId, job);
  }
}
