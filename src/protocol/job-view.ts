/**
 * What a client is shown of a job's state.
 *
 * Version 1 has six job states. Extensions add states (`SCHEDULED`: waiting
 * for its time; `WAITING`: waiting for other jobs) that a v1 client cannot
 * know. A client that understands them says so with `knownStates` on its
 * requests; every state it did not list is shown as its v1 equivalent, in
 * replies and in what a `LIST_JOBS` state filter matches. Our own clients
 * list every state they know; a client that sends nothing sees v1 only.
 */
import {
  V1_JOB_STATES,
  type ClientReply,
  type JobSnapshot,
  type JobState,
  type V1JobState,
} from './messages.js';

/** The v1 state an extension state is shown as. */
const V1_EQUIVALENT: Readonly<Record<Exclude<JobState, V1JobState>, V1JobState>> = {
  SCHEDULED: 'QUEUED',
  WAITING: 'QUEUED',
};

const V1: ReadonlySet<JobState> = new Set<JobState>(V1_JOB_STATES);

/** The states a client understands, from its request's `knownStates` (null/absent = v1 only). */
export class StateView {
  /** A v1 client's view. */
  static readonly V1 = new StateView(new Set(V1));
  /** A view that shows every state (our own clients, the dashboard). */
  static readonly ALL = new StateView(
    new Set<JobState>([...V1_JOB_STATES, ...(Object.keys(V1_EQUIVALENT) as JobState[])]),
  );

  readonly #known: ReadonlySet<JobState>;

  private constructor(known: ReadonlySet<JobState>) {
    this.#known = known;
  }

  /** The view of a request's `knownStates`; unknown names are ignored. */
  static of(knownStates: readonly string[] | null | undefined): StateView {
    if (knownStates == null || knownStates.length === 0) return StateView.V1;
    let scheduled = false;
    let waiting = false;
    for (const name of knownStates) {
      if (name === 'SCHEDULED') scheduled = true;
      else if (name === 'WAITING') waiting = true;
    }
    if (scheduled && waiting) return StateView.ALL;
    if (!scheduled && !waiting) return StateView.V1;
    const known = new Set(V1);
    known.add(scheduled ? 'SCHEDULED' : 'WAITING');
    return new StateView(known);
  }

  /** True when this view shows every state as it is. */
  get showsAll(): boolean {
    return this.#known.size === StateView.ALL.#known.size;
  }

  /** True when the client knows `state` (so it may filter on it). */
  knows(state: JobState): boolean {
    return this.#known.has(state);
  }

  /** `state` as this client is shown it. */
  show(state: JobState): JobState {
    if (this.#known.has(state)) return state;
    return V1_EQUIVALENT[state as Exclude<JobState, V1JobState>];
  }

  /**
   * Every state a filter on `state` (as this client is shown states)
   * matches: a v1 client's `QUEUED` is also every state shown as QUEUED.
   */
  matchedBy(state: JobState): JobState[] {
    const states: JobState[] = [state];
    for (const [extension, v1] of Object.entries(V1_EQUIVALENT)) {
      if (v1 === state && !this.#known.has(extension as JobState)) {
        states.push(extension as JobState);
      }
    }
    return states;
  }

  /** A snapshot as this client is shown it (the same object when nothing changes). */
  snapshot(job: JobSnapshot): JobSnapshot {
    const state = this.show(job.state);
    return state === job.state ? job : { ...job, state };
  }

  /** A reply as this client is shown it (the same object when nothing changes). */
  reply(reply: ClientReply): ClientReply {
    if (this.showsAll) return reply;
    switch (reply.type) {
      case 'JOB_SUBMITTED': {
        const job = reply.job === null ? null : this.snapshot(reply.job);
        return job === reply.job ? reply : { ...reply, job };
      }
      case 'JOB_STATUS':
      case 'JOB_CANCEL':
      case 'JOB_EVENT':
        return this.#withJob(reply);
      case 'JOB_LIST': {
        const jobs = reply.jobs.map((job) => this.snapshot(job));
        return jobs.every((job, i) => job === reply.jobs[i]) ? reply : { ...reply, jobs };
      }
      case 'SCHEDULE_INFO': {
        const recent = reply.recentJobs;
        if (recent == null) return reply;
        const shown = recent.map((job) => {
          const state = this.show(job.state);
          return state === job.state ? job : { ...job, state };
        });
        return { ...reply, recentJobs: shown };
      }
      case 'SUBMIT_REJECTED':
      case 'JOBS_SUBMITTED':
      case 'WORKER_LIST':
      case 'JOBS_PURGED':
      case 'JOBS_RERUN':
      case 'FLOW_SUBMITTED':
      case 'SCHEDULE_LIST':
      case 'SCHEDULE_DELETED':
      case 'AUTH_OK':
      case 'ERROR':
      case 'QUEUE_LIST':
      case 'QUEUE_INFO':
      case 'SUBSCRIBED':
      case 'EVENTS_MISSED':
      case 'JOB_SIGNALLED':
      case 'EVENT_PUBLISHED':
      case 'TRIGGER_INFO':
      case 'TRIGGER_LIST':
      case 'TRIGGER_DELETED':
      case 'SHARD_LIST':
        return reply;
    }
  }

  #withJob<R extends { job: JobSnapshot }>(reply: R): R {
    const shown = this.snapshot(reply.job);
    return shown === reply.job ? reply : { ...reply, job: shown };
  }
}

/** Every state our own clients understand, as they send it in `knownStates`. */
export const KNOWN_STATES: readonly string[] = Object.keys(V1_EQUIVALENT);
