/**
 * SUBMIT_FLOW: many jobs with dependencies among them, created in one input
 * (so in one write batch, one commit) or not at all.
 *
 * Order: (1) the flow's shape (1..MAX_FLOW_JOBS jobs, unique refs, unique
 * idempotency keys) and every job as a SUBMIT_JOB would be checked; (2) the
 * refs are sorted so that every parent comes before its dependents, which
 * finds any cycle; (3) idempotency keys memory does not know are looked up
 * in the store, all at once, each key pinned in the job table until the
 * flow is answered (a job another request makes with it meanwhile stays
 * known, even once it ended); (4) with every key answered, each keyed job is
 * settled in that order: an existing job with the same submission (its
 * parents the same jobs) stands for it, one with a different submission
 * refuses the flow (IDEMPOTENCY_CONFLICT); (5) parents that are not refs are
 * existing jobs, looked up in memory or in the store (unknown: UNKNOWN_JOB);
 * (6) admission control takes the flow's new jobs as a whole or refuses
 * them; (7) the new jobs are created in that order, each seeing its parents
 * as any submission does. Nothing is created before (7), and (7) cannot
 * fail. Step (4) runs again right before (6), in the same input, so a job
 * another request made meanwhile with one of the keys is seen.
 *
 * On a sharded database a flow may span shards: the shard of its first job
 * takes it whole. Its jobs of other shards are made here as rows, with ids
 * naming their shard, and leave in one `createJobs` message per shard in
 * the flow's commit (cross-shard.ts); the reply names every job at once.
 * They take no idempotency or deduplication key (this shard cannot check
 * another's keys) and count toward no limit here (their shard creates them
 * whatever its load: the flow was accepted). Their edges to jobs of this
 * shard are dependencies across shards, like any other.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import { toRecord } from './job.js';
import { decideDedup } from './dedup.js';
import { MAX_FLOW_JOBS, MAX_JOB_ID_LENGTH } from '../../protocol/limits.js';
import type { FlowJob, SubmitFlow, SubmitJob } from '../../protocol/messages.js';
import type { JobRecord } from '../../store/store.js';
import { schedule } from './job-lifecycle.js';
import { madeElsewhere, sendJobsElsewhere, shardOfNewJob } from './cross-shard.js';
import type { RemoteDependentRecord } from '../../store/store.js';
import type { FlowPlan, NormalizedSubmission, PlannedJob } from './pending-reads.js';
import type { CoreState } from './state.js';
import {
  checkSubmission,
  createJob,
  dueAt,
  findParents,
  isProblem,
  matchDedup,
  newJobOf,
  type DedupMatch,
  sameSubmission,
  type SubmissionProblem,
} from './submission.js';

/** Handles one SUBMIT_FLOW. */
export function submitFlow(s: CoreState, connId: number, requestId: number, msg: SubmitFlow): void {
  const plan = planFlow(s, connId, requestId, msg.jobs);
  if ('code' in plan) {
    s.replyError(connId, requestId, plan.code, plan.message);
    return;
  }
  const unknown: string[] = [];
  for (const job of plan.ordered) {
    const key = job.msg.idempotencyKey;
    if (key === null) continue;
    const known = s.jobs.byKey(key);
    if (known !== undefined) plan.keys.found.set(key, toRecord(known));
    else unknown.push(key);
  }
  if (unknown.length === 0) return lookUpExternal(s, plan, new Map(), null);
  plan.keys.waiting = unknown.length;
  for (const key of unknown) {
    // A job another submission makes with the key meanwhile stays known until the flow is answered.
    s.jobs.pinKey(key);
    plan.keys.lookedUp.push(key);
    s.read({ op: 'jobByKey', key }, { kind: 'flowKey', plan, key });
  }
}

/** The flow was answered (created or refused): the keys it asked the store about need not stay pinned. */
export function flowSettled(s: CoreState, plan: FlowPlan): void {
  for (const key of plan.keys.lookedUp.splice(0)) s.jobs.unpinKey(key);
}

/** One key lookup of a flow was answered: the flow goes on after the last one. */
export function flowKeyLookedUp(
  s: CoreState,
  plan: FlowPlan,
  key: string,
  stored: JobRecord | null,
): void {
  plan.keys.found.set(key, stored);
  plan.keys.waiting -= 1;
  if (plan.keys.waiting > 0) return;
  if (plan.keys.failed) flowSettled(s, plan);
  else lookUpExternal(s, plan, new Map(), null);
}

/** One key lookup of a flow failed: the flow gets an error (once); nothing is created. */
export function flowKeyLookupFailed(s: CoreState, plan: FlowPlan, message: string): void {
  plan.keys.waiting -= 1;
  if (plan.keys.waiting === 0) flowSettled(s, plan);
  if (plan.keys.failed) return;
  plan.keys.failed = true;
  s.replyError(
    plan.connId,
    plan.requestId,
    ErrorCode.StoreReadFailed,
    `Could not check idempotency keys: ${message}; nothing was created`,
  );
}

/** The store answered for a flow's existing parents. */
export function flowParentsLookedUp(
  s: CoreState,
  plan: FlowPlan,
  asked: readonly string[],
  rows: readonly JobRecord[],
): void {
  lookUpExternal(s, plan, new Map(rows.map((row) => [row.jobId, row])), asked);
}

/** Ref -> the existing job that stands for it, or null for a job to create. */
type Settled = Map<string, string | null>;

/**
 * Step (4): each keyed job in parents-first order, against the job its key
 * names now (memory first, then what the store said). Its parents must be
 * the same jobs: a parent ref that would be created anew cannot be the
 * existing job's parent, so that is a conflict too.
 */
function settleKeys(s: CoreState, plan: FlowPlan): Settled | SubmissionProblem {
  const settled: Settled = new Map();
  for (const job of plan.ordered) {
    const key = job.msg.idempotencyKey;
    const inMemory = key === null ? undefined : s.jobs.byKey(key);
    const found =
      key === null
        ? null
        : inMemory !== undefined
          ? toRecord(inMemory)
          : (plan.keys.found.get(key) ?? null);
    if (found === null) {
      settled.set(job.ref, null);
      continue;
    }
    const conflict = (why: string): SubmissionProblem => ({
      code: ErrorCode.IdempotencyConflict,
      message: `Idempotency key ${JSON.stringify(key)} (ref ${JSON.stringify(job.ref)}) is already used by job ${found.jobId} ${why}; nothing was created`,
    });
    const parents: string[] = [];
    for (const name of job.wanted.dependsOn ?? []) {
      const existing = settled.get(name);
      if (existing === null)
        return conflict(`and its parent ref ${JSON.stringify(name)} would be a new job`);
      parents.push(existing ?? name);
    }
    const wanted = { ...job.wanted, dependsOn: job.wanted.dependsOn === null ? null : parents };
    if (!sameSubmission(found, job.msg, wanted)) return conflict('with a different submission');
    settled.set(job.ref, found.jobId);
  }
  return settled;
}

/**
 * Creates the flow once every existing parent is known: asks the store for
 * those memory does not hold (again, once, for one that left memory while
 * the store was asked), refuses the flow for one the store does not have.
 * Existing parents are the flow's external ones and the existing jobs that
 * stand for keyed refs which new jobs depend on.
 */
function lookUpExternal(
  s: CoreState,
  plan: FlowPlan,
  stored: ReadonlyMap<string, JobRecord>,
  asked: readonly string[] | null,
): void {
  if (!goOn(s, plan, stored, asked)) flowSettled(s, plan);
}

/** {@link lookUpExternal}'s steps; true when the flow waits for the store again. */
function goOn(
  s: CoreState,
  plan: FlowPlan,
  stored: ReadonlyMap<string, JobRecord>,
  asked: readonly string[] | null,
): boolean {
  const settled = settleKeys(s, plan);
  if ('code' in settled) {
    s.replyError(plan.connId, plan.requestId, settled.code, settled.message);
    return false;
  }
  const needed = new Set(plan.external);
  for (const job of plan.ordered) {
    if (settled.get(job.ref) !== null) continue;
    for (const name of job.wanted.dependsOn ?? []) {
      const existing = settled.get(name);
      if (existing !== undefined && existing !== null) needed.add(existing);
    }
  }
  const missing = findParents([...needed], s, stored).missing;
  const askedSet = new Set(asked ?? []);
  const unknown = missing.find((id) => askedSet.has(id));
  if (unknown !== undefined) {
    s.replyError(
      plan.connId,
      plan.requestId,
      ErrorCode.UnknownJob,
      `Unknown job: ${unknown.slice(0, 200)} (named in dependsOn; not a ref of the flow either)`,
    );
    return false;
  }
  if (missing.length > 0) {
    s.read({ op: 'jobs', jobIds: missing }, { kind: 'flowParents', plan, asked: missing });
    return true;
  }
  createFlow(s, plan, settled, stored);
  return false;
}

function createFlow(
  s: CoreState,
  plan: FlowPlan,
  settled: Settled,
  stored: ReadonlyMap<string, JobRecord>,
): void {
  const { connId, requestId } = plan;
  const fresh = plan.ordered.filter(
    (job) => settled.get(job.ref) === null && shardOfNewJob(s, job.wanted.queue) === null,
  );
  // Every new job of a flow counts as active (delayed ones too: a flow is
  // admitted as a whole); SCHEDULED jobs count only once they are due.
  const activeCount = s.jobs.activeCount - s.scheduledCount;
  const limit = s.config.maxActiveJobs;
  if (fresh.length > 0 && activeCount + fresh.length > limit) {
    s.emit({ type: 'job.rejected', activeCount, limit });
    s.reply(connId, requestId, {
      type: 'SUBMIT_REJECTED',
      reason: `too many active jobs for a flow of ${fresh.length} new jobs (${activeCount} of ${limit} active); retry later`,
      activeCount,
      limit,
      retryable: activeCount > 0,
    });
    return;
  }
  const gone = dedupedParentGone(s, plan);
  if (gone !== null) {
    s.replyError(connId, requestId, ErrorCode.InvalidRequest, gone);
    return;
  }
  const idOf = new Map<string, string>();
  const matches = new Map<string, DedupMatch>();
  /** The flow's jobs of other shards, by shard, in parents-first order. */
  const elsewhere = new Map<number, JobRecord[]>();
  /** Of those, the ones with children here: the children each shard is told of. */
  const watchers = new Map<number, RemoteDependentRecord[]>();
  /** Job id -> its shard, for the jobs of the flow made elsewhere. */
  const madeIn = new Map<string, number>();
  for (const job of plan.ordered) {
    const existing = settled.get(job.ref) ?? null;
    if (existing !== null) {
      s.emit({
        type: 'job.deduplicated',
        jobId: existing,
        idempotencyKey: job.msg.idempotencyKey as string,
      });
      idOf.set(job.ref, existing);
      continue;
    }
    const dependsOn = job.wanted.dependsOn?.map((name) => idOf.get(name) ?? name) ?? null;
    const wanted: NormalizedSubmission = { ...job.wanted, dependsOn };
    const shard = shardOfNewJob(s, wanted.queue);
    if (shard !== null) {
      const row = madeElsewhere(s, shard, newJobOf(job.msg, wanted, dueAt(s, wanted), s.nowMs));
      listFor(elsewhere, shard).push(row);
      madeIn.set(row.jobId, shard);
      idOf.set(job.ref, row.jobId);
      continue;
    }
    // A job its deduplication key answers is not made: its dependents in the flow wait for that job.
    const matched = matchDedup(s, job.msg, wanted);
    if (matched !== null) {
      matches.set(job.ref, matched);
      idOf.set(job.ref, matched.jobId);
      continue;
    }
    const parents = dependsOn === null ? undefined : findParents(dependsOn, s, stored);
    // A parent the flow made elsewhere is told of this child by its
    // `createJobs` (a `watch` of its own could reach it first).
    const announced = parents?.remote.filter((id) => madeIn.has(id)) ?? [];
    if (parents !== undefined && announced.length > 0) {
      parents.remote = parents.remote.filter((id) => !madeIn.has(id));
      parents.announced = announced;
    }
    const created = createJob(s, newJobOf(job.msg, wanted, dueAt(s, wanted), s.nowMs), parents);
    idOf.set(job.ref, created.jobId);
    const place = s.links.place;
    if (place !== null && created.state === 'WAITING') {
      for (const parentId of announced) {
        listFor(watchers, madeIn.get(parentId) as number).push({
          parentId,
          childId: created.jobId,
          childShard: place.shard,
        });
      }
    }
  }
  for (const [shard, jobs] of elsewhere) {
    sendJobsElsewhere(s, shard, jobs, watchers.get(shard) ?? []);
  }
  s.reply(connId, requestId, {
    type: 'FLOW_SUBMITTED',
    jobs: plan.refs.map((ref) => {
      const matched = matches.get(ref);
      return {
        ref,
        jobId: idOf.get(ref) as string,
        ...(matched !== undefined && { deduplicated: true }),
        ...(matched?.replaced === true && { replaced: true }),
      };
    }),
  });
  schedule(s);
}

/**
 * A flow job with dependents in the flow whose deduplication key would name
 * a job that ended and is no longer in memory (a throttle window): its
 * dependents could not be told how it ended, so the flow is refused, saying
 * which job to name instead. Null when there is none.
 */
function dedupedParentGone(s: CoreState, plan: FlowPlan): string | null {
  const parents = new Set<string>();
  for (const job of plan.ordered) for (const name of job.wanted.dependsOn ?? []) parents.add(name);
  for (const job of plan.ordered) {
    const dedup = job.wanted.dedup;
    if (dedup === null || !parents.has(job.ref)) continue;
    const decision = decideDedup(s, job.wanted.queue, dedup);
    if (decision.kind === 'existing' && decision.job === undefined) {
      return (
        `Invalid request: ref ${JSON.stringify(job.ref)} is deduplicated against job ${decision.jobId}, ` +
        'which has ended; name that job in dependsOn instead of the ref'
      );
    }
  }
  return null;
}

/** Checks a flow and orders it parents first; or why it is refused. */
function planFlow(
  s: CoreState,
  connId: number,
  requestId: number,
  jobs: readonly FlowJob[],
): FlowPlan | SubmissionProblem {
  if (jobs.length === 0) return invalid('a flow needs at least one job');
  if (jobs.length > MAX_FLOW_JOBS) {
    return invalid(`a flow has at most ${MAX_FLOW_JOBS} jobs, got ${jobs.length}`);
  }
  const byRef = new Map<string, PlannedJob>();
  const keyRefs = new Map<string, string>();
  for (const [index, job] of jobs.entries()) {
    const planned = planJob(s, index, job);
    if ('code' in planned) return planned;
    if (byRef.has(job.ref))
      return invalid(`jobs[${index}]: ref ${JSON.stringify(job.ref)} is used twice`);
    byRef.set(job.ref, planned);
    const key = planned.msg.idempotencyKey;
    if (key === null) continue;
    const first = keyRefs.get(key);
    if (first !== undefined) {
      return invalid(
        `jobs[${index}]: idempotency key ${JSON.stringify(key)} is also the key of ref ${JSON.stringify(first)}`,
      );
    }
    keyRefs.set(key, job.ref);
  }
  const ordered = parentsFirst(byRef);
  if ('code' in ordered) return ordered;
  const external = new Set<string>();
  for (const job of byRef.values()) {
    for (const name of job.wanted.dependsOn ?? []) if (!byRef.has(name)) external.add(name);
  }
  return {
    connId,
    requestId,
    refs: jobs.map((job) => job.ref),
    ordered,
    external: [...external],
    keys: { found: new Map(), lookedUp: [], waiting: 0, failed: false },
  };
}

function planJob(s: CoreState, index: number, job: FlowJob): PlannedJob | SubmissionProblem {
  const where = `jobs[${index}]`;
  if (job.ref.length === 0 || job.ref.length > MAX_JOB_ID_LENGTH) {
    return invalid(`${where}: ref must be 1..${MAX_JOB_ID_LENGTH} characters`);
  }
  const msg: SubmitJob = {
    type: 'SUBMIT_JOB',
    taskType: job.taskType,
    payload: job.payload,
    maxAttempts: job.maxAttempts ?? null,
    idempotencyKey: job.idempotencyKey ?? null,
    priority: job.priority ?? null,
    timeoutMillis: job.timeoutMillis ?? null,
    dependsOn: job.dependsOn ?? null,
    onParentFailure: job.onParentFailure ?? null,
    runAtMillis: job.runAtMillis ?? null,
    traceparent: job.traceparent ?? null,
    tracestate: job.tracestate ?? null,
    queue: job.queue ?? null,
    groupKey: job.groupKey ?? null,
    dedupKey: job.dedupKey ?? null,
    dedupMode: job.dedupMode ?? null,
    dedupWindowMillis: job.dedupWindowMillis ?? null,
    expiresAtMillis: job.expiresAtMillis ?? null,
  };
  const wanted = checkSubmission(s, msg);
  if (isProblem(wanted)) {
    return {
      code: wanted.code,
      message: `${where} (ref ${JSON.stringify(job.ref)}): ${wanted.message}`,
    };
  }
  const elsewhere = shardOfNewJob(s, wanted.queue);
  if (elsewhere !== null && (msg.idempotencyKey !== null || wanted.dedup !== null)) {
    return invalid(
      `${where} (ref ${JSON.stringify(job.ref)}): its queue ${JSON.stringify(wanted.queue)} is in shard ${elsewhere}, ` +
        `and a job of another shard than the flow's first job takes no idempotencyKey or dedupKey`,
    );
  }
  return { ref: job.ref, msg, wanted };
}

/**
 * The flow's jobs with every parent before its dependents (Kahn's order,
 * stable in request order), or a FLOW_CYCLE refusal naming a ref on a cycle.
 */
function parentsFirst(byRef: ReadonlyMap<string, PlannedJob>): PlannedJob[] | SubmissionProblem {
  const waitingOn = new Map<string, number>();
  const children = new Map<string, string[]>();
  for (const job of byRef.values()) {
    const inFlow = (job.wanted.dependsOn ?? []).filter((name) => byRef.has(name));
    waitingOn.set(job.ref, inFlow.length);
    for (const parent of inFlow) {
      const list = children.get(parent) ?? [];
      list.push(job.ref);
      children.set(parent, list);
    }
  }
  const ready = [...byRef.keys()].filter((ref) => waitingOn.get(ref) === 0);
  const ordered: PlannedJob[] = [];
  for (let i = 0; i < ready.length; i++) {
    const ref = ready[i] as string;
    ordered.push(byRef.get(ref) as PlannedJob);
    for (const child of children.get(ref) ?? []) {
      const left = (waitingOn.get(child) ?? 0) - 1;
      waitingOn.set(child, left);
      if (left === 0) ready.push(child);
    }
  }
  if (ordered.length === byRef.size) return ordered;
  const onCycle = [...waitingOn].find(([, left]) => left > 0)?.[0] ?? '';
  return {
    code: ErrorCode.FlowCycle,
    message: `Invalid flow: the dependencies form a cycle (through ref ${JSON.stringify(onCycle)}); nothing was created`,
  };
}

function invalid(detail: string): SubmissionProblem {
  return { code: ErrorCode.InvalidFlow, message: `Invalid flow: ${detail}; nothing was created` };
}

function listFor<K, V>(map: Map<K, V[]>, key: K): V[] {
  let list = map.get(key);
  if (list === undefined) map.set(key, (list = []));
  return list;
}
