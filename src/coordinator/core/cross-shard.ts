/**
 * Flows and dependencies across shards: the messages of the cluster's outbox
 * to this shard, applied (docs/ARCHITECTURE.md, "Across shards: the outbox";
 * shard-messages.ts sends them, shard-links.ts keeps what they leave).
 *
 * The shell reads the outbox rows to this shard and hands them over as one
 * `outboxMessages` input, in id order. Each message is applied once per term
 * (shard-links.ts), in that order, and deleted by the batch that applies it;
 * after a restart or a takeover the rows not deleted yet come again, so
 * applying a message twice must change nothing:
 *
 * - `createJobs`: a flow submitted to another shard made these jobs of ours.
 *   Each is created as the flow made it (its id, its creation time), seeing
 *   its parents as any new job does; one already here (in memory or in the
 *   store) was created by an earlier application and is skipped. Its
 *   `watchers` are that flow's children elsewhere, applied as `watch`es.
 *   They are created whatever this shard's limits: the flow was accepted.
 * - `watch`: a job elsewhere waits for a job of ours (a child of it, or a
 *   handler's `ctx.waitFor`: the same to us). Not ended: the waiter is
 *   remembered (and stored) until the job ends, when `parentEnded` goes out
 *   in the commit of the end. Ended (in memory or in the store): told at
 *   once. Unknown here: told at once that it is unknown (state null).
 * - `parentEnded`: a parent elsewhere ended. Our children that wait for it
 *   settle exactly as for a parent of ours (`onParentFailure`, the parents'
 *   results of TASK_ASSIGN); its outcome is stored for them (recovery, and
 *   the results). The jobs it names that wait for it in `ctx.waitFor` go on
 *   with its outcome, which their wait step keeps (steps.ts). Heard twice:
 *   the second time nobody waits for it.
 *
 * A message that needs a read of the store first (what memory does not
 * hold) waits for it, and the messages taken after it are held and apply
 * right after it, in order.
 */
import { isTerminalState } from '../../protocol/messages.js';
import { shardOfQueue } from '../../protocol/shards.js';
import type {
  JobRecord,
  OutboxBody,
  OutboxMessage,
  RemoteDependentRecord,
} from '../../store/store.js';
import { finishedParentOf, type FinishedParent } from './dependencies.js';
import { toRecord, type CoreJob } from './job.js';
import { schedule, settleParentElsewhere } from './job-lifecycle.js';
import { loadFar, memoryJob } from './scheduled-window.js';
import {
  addRemoteDependent,
  otherShardOf,
  parentEndedBody,
  sendMessage,
} from './shard-messages.js';
import type { PendingRead } from './pending-reads.js';
import { unknownOutcome, type WaitOutcome } from './step-records.js';
import { endWaitsElsewhere } from './steps.js';
import type { CoreState } from './state.js';
import { createJob, findParents, freshJob, type NewJob } from './submission.js';

type CreateJobs = Extract<OutboxBody, { type: 'createJobs' }>;
type Watch = Extract<OutboxBody, { type: 'watch' }>;
type ParentEnded = Extract<OutboxBody, { type: 'parentEnded' }>;

/** The shard of a new job of `queue` when that is another shard than this core's; null otherwise. */
export function shardOfNewJob(s: CoreState, queue: string): number | null {
  const place = s.links.place;
  if (place === null) return null;
  const shard = shardOfQueue(queue, place.shards);
  return shard === place.shard ? null : shard;
}

/**
 * A flow's job of another shard, made here as a row: its id names its shard
 * (the reply can name it at once), `seq` is that shard's to give, and its
 * state is what it starts in (its shard decides again when it creates it).
 */
export function madeElsewhere(s: CoreState, shard: number, spec: NewJob): JobRecord {
  const delayed = spec.runAtMs !== null && spec.runAtMs > s.nowMs;
  return toRecord(
    freshJob(spec, {
      seq: 0,
      jobId: s.deps.newId(shard),
      createdAtMs: s.nowMs,
      nowMs: s.nowMs,
      state: spec.dependsOn !== null ? 'WAITING' : delayed ? 'SCHEDULED' : 'QUEUED',
    }),
  );
}

/** Sends a flow's jobs of `shard` (and the children here that wait for some of them). */
export function sendJobsElsewhere(
  s: CoreState,
  shard: number,
  jobs: readonly JobRecord[],
  watchers: readonly RemoteDependentRecord[],
): void {
  sendMessage(s, shard, { type: 'createJobs', jobs, watchers });
}

/** The `outboxMessages` input: each message not applied yet, in id order. */
export function outboxMessages(
  s: CoreState,
  messages: readonly OutboxMessage[],
  committedThrough: number,
): void {
  if (s.links.place === null) return; // no shards: no outbox (the shell never reads one)
  s.links.seenCommitted(committedThrough);
  for (const message of messages) {
    if (!s.links.takes(message.id)) continue;
    if (s.links.reading) s.links.hold(message);
    else applyMessage(s, message);
  }
  schedule(s);
}

function applyMessage(s: CoreState, message: OutboxMessage): void {
  const body = message.body;
  switch (body.type) {
    case 'createJobs':
      return applyCreateJobs(s, message.id, body);
    case 'watch':
      return applyWatch(s, message.id, body);
    case 'parentEnded':
      return applyParentEnded(s, message.id, body);
  }
}

/** A message's read came back and it applied: the messages held behind it apply, in order. */
function applyHeld(s: CoreState): void {
  for (let next = s.links.nextHeld(); next !== undefined; next = s.links.nextHeld()) {
    applyMessage(s, next);
  }
  schedule(s);
}

/** The message is applied by this input's batch, which deletes it. */
function applied(s: CoreState, id: number): void {
  s.jobs.messageApplied(id);
  s.links.applied(id, s.jobs.pendingBatchId);
}

/** A job memory holds (active, ending, or ended a moment ago), without taking a far one in. */
function heldJob(s: CoreState, jobId: string): Readonly<CoreJob> | undefined {
  return s.jobs.get(jobId) ?? s.jobs.recent(jobId);
}

/**
 * `createJobs`: the store is asked first for what memory does not hold: the
 * message's jobs (one there was created by an earlier application) and
 * their parents of this shard made before the message.
 */
function applyCreateJobs(s: CoreState, id: number, body: CreateJobs): void {
  lookUpForCreate(s, id, body, new Map(), new Set());
}

/**
 * Creates the jobs once every id memory does not hold was asked of the
 * store (`stored`: what it answered, `asked`: every id asked so far). One
 * held in memory when the store was asked may have left it since (its end
 * committed): the store is asked again, for those only.
 */
function lookUpForCreate(
  s: CoreState,
  id: number,
  body: CreateJobs,
  stored: ReadonlyMap<string, JobRecord>,
  asked: ReadonlySet<string>,
): void {
  const own = new Set(body.jobs.map((job) => job.jobId));
  const unread = (jobId: string): boolean => !stored.has(jobId) && !asked.has(jobId);
  const ask = new Set<string>();
  for (const job of body.jobs) {
    // A job of the message that memory holds, even ended, was created before.
    if (heldJob(s, job.jobId) === undefined && unread(job.jobId)) ask.add(job.jobId);
    for (const parentId of job.dependsOn ?? []) {
      // A parent is found as findParents finds it: in memory, else in `stored`.
      if (own.has(parentId) || otherShardOf(s, parentId) !== null) continue;
      if (s.jobs.get(parentId) === undefined && unread(parentId)) ask.add(parentId);
    }
  }
  if (ask.size === 0) return createJobsNow(s, id, body, stored);
  s.links.read(id);
  s.read(
    { op: 'jobs', jobIds: [...ask] },
    {
      kind: 'outboxJobs',
      messageId: id,
      body,
      stored: [...stored.values()],
      asked: [...asked, ...ask],
    },
  );
}

/** The store answered for a `createJobs`: the jobs are created (or the store is asked again). */
export function outboxJobsRead(
  s: CoreState,
  read: Extract<PendingRead, { kind: 'outboxJobs' }>,
  rows: readonly JobRecord[],
): void {
  const stored = new Map([...read.stored, ...rows].map((row) => [row.jobId, row]));
  lookUpForCreate(s, read.messageId, read.body, stored, new Set(read.asked));
  if (!s.links.reading) applyHeld(s);
}

function createJobsNow(
  s: CoreState,
  id: number,
  body: CreateJobs,
  stored: ReadonlyMap<string, JobRecord>,
): void {
  for (const row of body.jobs) {
    if (heldJob(s, row.jobId) !== undefined || stored.has(row.jobId)) continue; // applied before
    const parents = row.dependsOn === null ? undefined : findParents(row.dependsOn, s, stored);
    createJob(s, specOf(row), parents, { jobId: row.jobId, createdAtMs: row.createdAtMs });
  }
  for (const watcher of body.watchers ?? []) watchNow(s, watcher, stored);
  applied(s, id);
}

/** What a new job is made of, from the row another shard made (createJob decides its state). */
function specOf(row: JobRecord): NewJob {
  return {
    taskType: row.taskType,
    payloadJson: row.payloadJson,
    priority: row.priority,
    maxAttempts: row.maxAttempts,
    timeoutMs: row.timeoutMs,
    idempotencyKey: row.idempotencyKey,
    runAtMs: row.runAtMs,
    scheduleName: row.scheduleName,
    queue: row.queue,
    groupKey: row.groupKey,
    dependsOn: row.dependsOn,
    onParentFailure: row.onParentFailure,
    traceContext: row.traceContext ?? null,
    parentJobId: row.parentJobId ?? null,
    childKey: row.childKey ?? null,
    dedupKey: row.dedupKey ?? null,
    dedupMode: row.dedupMode ?? null,
    dedupUntilMs: row.dedupUntilMs ?? null,
    expiresAtMs: row.expiresAtMs ?? null,
  };
}

/** `watch`: answered from memory, or from the store when memory does not hold the parent. */
function applyWatch(s: CoreState, id: number, body: Watch): void {
  if (heldJob(s, body.parentId) !== undefined) {
    watchNow(s, body, new Map());
    applied(s, id);
    return;
  }
  s.links.read(id);
  s.read(
    { op: 'jobs', jobIds: [body.parentId] },
    { kind: 'outboxWatch', messageId: id, watch: body },
  );
}

/** The store answered for a `watch`. */
export function outboxWatchRead(
  s: CoreState,
  messageId: number,
  watch: Watch,
  rows: readonly JobRecord[],
): void {
  watchNow(s, watch, new Map(rows.map((row) => [row.jobId, row])));
  applied(s, messageId);
  applyHeld(s);
}

/**
 * A child elsewhere waits for `parentId`: remembered while the parent has
 * not ended (a far delayed parent comes into memory, to tell it when it
 * ends), told at once otherwise.
 */
function watchNow(
  s: CoreState,
  watch: RemoteDependentRecord,
  stored: ReadonlyMap<string, JobRecord>,
): void {
  const { parentId, childId, childShard } = watch;
  const job = memoryJob(s, parentId) ?? s.jobs.recent(parentId);
  const row = job === undefined ? stored.get(parentId) : undefined;
  const found = job ?? row;
  if (found === undefined) {
    return sendMessage(s, childShard, parentEndedBody(parentId, null, null, [childId]));
  }
  if (!isTerminalState(found.state)) {
    // Only a far delayed job is active without being in memory.
    if (row?.state === 'SCHEDULED') loadFar(s, row);
    return addRemoteDependent(s, { parentId, childId, childShard });
  }
  const ended = parentEndedBody(parentId, finishedParentOf(found), found.error, [childId]);
  sendMessage(s, childShard, ended);
}

/**
 * `parentEnded`: our children that wait for the parent settle, its outcome
 * kept for them; the jobs named that wait for it in `ctx.waitFor` go on
 * with its outcome (their step keeps it).
 */
function applyParentEnded(s: CoreState, id: number, body: ParentEnded): void {
  const parent: FinishedParent | null =
    body.state === null
      ? null
      : {
          jobId: body.parentId,
          taskType: body.taskType,
          state: body.state,
          result: body.result,
          resultFormat: body.resultFormat,
        };
  const waited = settleParentElsewhere(s, body.parentId, parent);
  if (waited > 0 && body.state !== null) {
    s.jobs.saveRemoteParent({
      parentId: body.parentId,
      taskType: body.taskType,
      state: body.state,
      result: body.result,
      resultFormat: body.resultFormat,
    });
  }
  endWaitsElsewhere(s, body.parentId, body.childIds, waitOutcomeOf(body));
  applied(s, id);
}

/** What a job in `ctx.waitFor` gets of a job of another shard's end, as outcomeOf gives it. */
function waitOutcomeOf(body: ParentEnded): WaitOutcome {
  if (body.state === null) return unknownOutcome(body.parentId);
  return {
    jobId: body.parentId,
    state: body.state,
    result: body.state === 'COMPLETED' ? body.result : null,
    resultFormat: body.state === 'COMPLETED' ? body.resultFormat : null,
    error: body.error ?? null,
  };
}

/**
 * A read a message waited for failed: neither it nor the messages held
 * behind it are applied; a later read of the outbox brings them again.
 */
export function outboxReadFailed(s: CoreState, messageId: number): void {
  s.links.abandoned(messageId);
}
