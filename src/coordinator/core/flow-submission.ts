/**
 * SUBMIT_FLOW: many jobs with dependencies among them, created in one input
 * (so in one write batch, one commit) or not at all.
 *
 * Order: (1) the flow's shape (1..MAX_FLOW_JOBS jobs, unique refs) and
 * every job as a SUBMIT_JOB would be checked; (2) the refs are sorted so
 * that every parent comes before its dependents, which finds any cycle;
 * (3) parents that are not refs are existing jobs, looked up in memory or
 * in the store (unknown: UNKNOWN_JOB); (4) admission control takes the whole
 * flow or refuses it; (5) the jobs are created in that order, each seeing
 * its parents as any submission does. Nothing is created before (5), and
 * (5) cannot fail.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import { MAX_FLOW_JOBS, MAX_JOB_ID_LENGTH } from '../../protocol/limits.js';
import type { FlowJob, SubmitFlow, SubmitJob } from '../../protocol/messages.js';
import type { JobRecord } from '../../store/store.js';
import { schedule } from './job-lifecycle.js';
import type { FlowPlan, NormalizedSubmission, PlannedJob } from './pending-reads.js';
import type { CoreState } from './state.js';
import {
  checkSubmission,
  createJob,
  dueAt,
  findParents,
  isProblem,
  newJobOf,
  type SubmissionProblem,
} from './submission.js';

/** Handles one SUBMIT_FLOW. */
export function submitFlow(s: CoreState, connId: number, requestId: number, msg: SubmitFlow): void {
  const plan = planFlow(s, connId, requestId, msg.jobs);
  if ('code' in plan) {
    s.replyError(connId, requestId, plan.code, plan.message);
    return;
  }
  lookUpExternal(s, plan, new Map(), null);
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

/**
 * Creates the flow once every existing parent is known: asks the store for
 * those memory does not hold (again, once, for one that left memory while
 * the store was asked), refuses the flow for one the store does not have.
 */
function lookUpExternal(
  s: CoreState,
  plan: FlowPlan,
  stored: ReadonlyMap<string, JobRecord>,
  asked: readonly string[] | null,
): void {
  const missing = findParents(plan.external, s, stored).missing;
  const askedSet = new Set(asked ?? []);
  const unknown = missing.find((id) => askedSet.has(id));
  if (unknown !== undefined) {
    s.replyError(
      plan.connId,
      plan.requestId,
      ErrorCode.UnknownJob,
      `Unknown job: ${unknown.slice(0, 200)} (named in dependsOn; not a ref of the flow either)`,
    );
    return;
  }
  if (missing.length > 0) {
    s.read({ op: 'jobs', jobIds: missing }, { kind: 'flowParents', plan, asked: missing });
    return;
  }
  createFlow(s, plan, stored);
}

function createFlow(s: CoreState, plan: FlowPlan, stored: ReadonlyMap<string, JobRecord>): void {
  const { connId, requestId } = plan;
  // Every job of a flow counts as active (delayed ones too: a flow is
  // admitted as a whole); SCHEDULED jobs count only once they are due.
  const activeCount = s.jobs.activeCount - s.scheduledCount;
  const limit = s.config.maxActiveJobs;
  if (activeCount + plan.ordered.length > limit) {
    s.emit({ type: 'job.rejected', activeCount, limit });
    s.reply(connId, requestId, {
      type: 'SUBMIT_REJECTED',
      reason: `too many active jobs for a flow of ${plan.ordered.length} (${activeCount} of ${limit} active); retry later`,
      activeCount,
      limit,
      retryable: activeCount > 0,
    });
    return;
  }
  const idOf = new Map<string, string>();
  for (const job of plan.ordered) {
    const dependsOn = job.wanted.dependsOn?.map((name) => idOf.get(name) ?? name) ?? null;
    const wanted: NormalizedSubmission = { ...job.wanted, dependsOn };
    const parents = dependsOn === null ? undefined : findParents(dependsOn, s, stored);
    const created = createJob(s, newJobOf(job.msg, wanted, dueAt(s, wanted)), parents);
    idOf.set(job.ref, created.jobId);
  }
  s.reply(connId, requestId, {
    type: 'FLOW_SUBMITTED',
    jobs: plan.refs.map((ref) => ({ ref, jobId: idOf.get(ref) as string })),
  });
  schedule(s);
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
  for (const [index, job] of jobs.entries()) {
    const planned = planJob(s, index, job);
    if ('code' in planned) return planned;
    if (byRef.has(job.ref))
      return invalid(`jobs[${index}]: ref ${JSON.stringify(job.ref)} is used twice`);
    byRef.set(job.ref, planned);
  }
  const ordered = parentsFirst(byRef);
  if ('code' in ordered) return ordered;
  const external = new Set<string>();
  for (const job of byRef.values()) {
    for (const name of job.wanted.dependsOn ?? []) if (!byRef.has(name)) external.add(name);
  }
  return { connId, requestId, refs: jobs.map((job) => job.ref), ordered, external: [...external] };
}

function planJob(s: CoreState, index: number, job: FlowJob): PlannedJob | SubmissionProblem {
  const where = `jobs[${index}]`;
  if (job.ref.length === 0 || job.ref.length > MAX_JOB_ID_LENGTH) {
    return invalid(`${where}: ref must be 1..${MAX_JOB_ID_LENGTH} characters`);
  }
  if ((job.idempotencyKey ?? null) !== null) {
    return {
      code: ErrorCode.InvalidRequest,
      message: `Invalid request: ${where} (ref ${JSON.stringify(job.ref)}): idempotencyKey is not supported in a flow`,
    };
  }
  const msg: SubmitJob = {
    type: 'SUBMIT_JOB',
    taskType: job.taskType,
    payload: job.payload,
    maxAttempts: job.maxAttempts ?? null,
    idempotencyKey: null,
    priority: job.priority ?? null,
    timeoutMillis: job.timeoutMillis ?? null,
    dependsOn: job.dependsOn ?? null,
    onParentFailure: job.onParentFailure ?? null,
    runAtMillis: job.runAtMillis ?? null,
    traceparent: job.traceparent ?? null,
    tracestate: job.tracestate ?? null,
    queue: job.queue ?? null,
    groupKey: job.groupKey ?? null,
  };
  const wanted = checkSubmission(s, msg);
  if (isProblem(wanted)) {
    return {
      code: wanted.code,
      message: `${where} (ref ${JSON.stringify(job.ref)}): ${wanted.message}`,
    };
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
