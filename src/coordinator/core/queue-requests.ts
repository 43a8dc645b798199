/**
 * LIST_QUEUES and SET_QUEUE: the named queues as clients see them, and
 * changes to their settings (pause, resume, limits).
 *
 * A change is applied to the core at once (the scheduler obeys it from this
 * input on) and written with this input's batch; the reply, which carries
 * the queue's job counts as the store has them, leaves after that commit.
 * A queue is listed once it has a stored job or a setting.
 *
 * A pause or resume of a queue without a setting is held until the store
 * has counted the jobs of every queue (after the commits before it, so a job
 * just submitted counts). One without jobs either is then refused
 * (`UNKNOWN_QUEUE`), unless the request says `create`, when it is resumed
 * (there is nothing to resume) or when its name is a near miss of a queue
 * that exists (a typo); a pause of a new name with no near miss goes ahead,
 * so that a queue can be paused before its first job. Either way the reply
 * of a change that made a new queue says `created`. `set` creates settings
 * by design and is never refused so. Later changes of the same queue wait
 * behind a held one and are applied after it, in the order they came (the
 * reads that hold them may answer in any order).
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import {
  QUEUE_SETTING_FIELDS,
  type JobState,
  type QueueInfo,
  type QueueSettingField,
  type SetQueue,
} from '../../protocol/messages.js';
import { concurrencyProblem, queueNameProblem, rateProblem } from '../../protocol/queue-names.js';
import type { QueueCount } from '../../store/store.js';
import { schedule } from './job-lifecycle.js';
import type { PendingRead } from './pending-reads.js';
import { NO_GROUP, queueInfoOf, type QueueSettings } from './queue-table.js';
import type { CoreState } from './state.js';

/** Groups shown per queue (the largest backlogs). */
const GROUPS_SHOWN = 10;

/** Queue names compared with an unknown one for a near miss (bounds the work of one request). */
const NEAR_MISS_CANDIDATES = 10_000;

export function listQueues(s: CoreState, connId: number, requestId: number): void {
  s.read({ op: 'queueCounts', queue: null }, { kind: 'queues', connId, requestId, queue: null });
}

export function setQueue(s: CoreState, connId: number, requestId: number, msg: SetQueue): void {
  const next = changedSettings(s, msg);
  if (typeof next === 'string') {
    s.replyError(connId, requestId, ErrorCode.InvalidRequest, `Invalid request: ${next}`);
    return;
  }
  const waiting = s.queueChangesWaiting.get(msg.name);
  if (waiting !== undefined) {
    waiting.push({ connId, requestId, msg });
    return;
  }
  if (isPauseOfUnsetQueue(s, msg)) {
    s.queueChangesWaiting.set(msg.name, []);
    s.read(
      { op: 'queueCounts', queue: null },
      { kind: 'queues', connId, requestId, queue: msg.name, held: msg },
      { afterCommit: true },
    );
    return;
  }
  apply(s, msg, next);
  s.read(
    { op: 'queueCounts', queue: msg.name },
    { kind: 'queues', connId, requestId, queue: msg.name },
  );
  schedule(s);
}

/** A pause or resume of a queue that has no setting (yet): does it exist at all? */
function isPauseOfUnsetQueue(s: CoreState, msg: SetQueue): boolean {
  return msg.paused != null && s.queues.get(msg.name)?.stored !== true;
}

/** The change, in memory and in this input's batch (the caller then schedules). */
function apply(s: CoreState, msg: SetQueue, next: QueueSettings): void {
  s.jobs.saveQueue(s.queues.set(msg.name, next, s.nowMs));
  // Held groups are looked at again under the new limits.
  s.ready.unpark(msg.name);
}

/**
 * A held pause or resume, now that the store has counted every queue's
 * jobs: refused for a queue that has none (see the module comment), else
 * applied (memory may have changed meanwhile: it is checked again) and
 * answered with the counts just read.
 */
function settleHeld(
  s: CoreState,
  read: Extract<PendingRead, { kind: 'queues' }>,
  msg: SetQueue,
  byQueue: ReadonlyMap<string, Partial<Record<JobState, number>>>,
): void {
  const exists = byQueue.has(msg.name) || s.queues.get(msg.name)?.stored === true;
  if (!exists && msg.create !== true) {
    const refusal = unknownQueueRefusal(s, msg, byQueue.keys());
    if (refusal !== null) {
      s.replyError(read.connId, read.requestId, ErrorCode.UnknownQueue, refusal);
      return;
    }
  }
  const next = changedSettings(s, msg);
  if (typeof next === 'string') {
    s.replyError(read.connId, read.requestId, ErrorCode.InvalidRequest, `Invalid request: ${next}`);
    return;
  }
  apply(s, msg, next);
  const queue = infoOf(s, msg.name, byQueue.get(msg.name) ?? {});
  s.reply(read.connId, read.requestId, {
    type: 'QUEUE_INFO',
    queue,
    ...(!exists && { created: true }),
  });
  schedule(s);
}

/** Why a pause or resume of a queue without jobs or settings is refused, or null (a new queue). */
function unknownQueueRefusal(
  s: CoreState,
  msg: SetQueue,
  withJobs: Iterable<string>,
): string | null {
  const names = new Set(withJobs);
  for (const q of s.queues.values()) if (q.stored) names.add(q.name);
  const near = nearMiss(msg.name, names);
  const hint = near === null ? '' : ` (did you mean ${JSON.stringify(near)}?)`;
  const unknown = `Unknown queue ${JSON.stringify(msg.name)}: no job and no setting has this name${hint}`;
  if (msg.paused === false) return `${unknown}; there is nothing to resume`;
  if (near === null) return null;
  return `${unknown}; to pause a queue before its first job, ask with create (queue pause --create)`;
}

/** A name within two edits of `name` (a typo of it), or null. */
function nearMiss(name: string, names: Iterable<string>): string | null {
  let looked = 0;
  for (const other of names) {
    if (++looked > NEAR_MISS_CANDIDATES) break;
    if (other !== name && withinTwoEdits(name, other)) return other;
  }
  return null;
}

/** Levenshtein distance of at most 2, cut short as soon as it cannot be. */
function withinTwoEdits(a: string, b: string): boolean {
  if (Math.abs(a.length - b.length) > 2) return false;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row.push(
        Math.min((previous[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + cost),
      );
    }
    if (Math.min(...row) > 2) return false;
    previous = row;
  }
  return (previous[b.length] ?? 0) <= 2;
}

/** The settings after the change, or what is wrong with the request (naming the field). */
function changedSettings(s: CoreState, msg: SetQueue): QueueSettings | string {
  const badName = queueNameProblem(msg.name);
  if (badName !== null) return `name ${badName}`;
  const clear = new Set<QueueSettingField>();
  for (const field of msg.clear ?? []) {
    if (!(QUEUE_SETTING_FIELDS as readonly string[]).includes(field)) {
      return `clear: unknown setting ${JSON.stringify(field.slice(0, 40))} (one of ${QUEUE_SETTING_FIELDS.join(', ')})`;
    }
    clear.add(field as QueueSettingField);
  }
  const next: QueueSettings = { ...s.queues.settingsOf(msg.name) };
  if (msg.paused !== undefined && msg.paused !== null) next.paused = msg.paused;
  for (const field of ['concurrency', 'groupConcurrency'] as const) {
    const value = msg[field];
    if (value === undefined || value === null) continue;
    const problem = concurrencyProblem(value);
    if (problem !== null) return `${field} ${problem}`;
    next[field] = value;
  }
  const rates = [
    ['rateLimit', 'rate'],
    ['groupRateLimit', 'groupRate'],
  ] as const;
  for (const [field, key] of rates) {
    const value = msg[field];
    if (value === undefined || value === null) continue;
    const problem = rateProblem(value);
    if (problem !== null) return `${field} ${problem}`;
    next[key] = { ...value };
  }
  for (const field of clear) {
    if (msg[field] !== undefined && msg[field] !== null) {
      return `${field} is both set and cleared`;
    }
    if (field === 'rateLimit') next.rate = null;
    else if (field === 'groupRateLimit') next.groupRate = null;
    else next[field] = null;
  }
  return next;
}

/** The store counted the queues' jobs: answer with the queue (SET_QUEUE) or all of them. */
export function queueCountsDone(
  s: CoreState,
  read: Extract<PendingRead, { kind: 'queues' }>,
  counts: readonly QueueCount[],
): void {
  const byQueue = new Map<string, Partial<Record<JobState, number>>>();
  for (const { queue, state, count } of counts) {
    const entry = byQueue.get(queue) ?? {};
    entry[state] = (entry[state] ?? 0) + count;
    byQueue.set(queue, entry);
  }
  if (read.held !== undefined) {
    settleHeld(s, read, read.held, byQueue);
    return heldChangeSettled(s, read.held.name);
  }
  if (read.queue !== null) {
    const info = infoOf(s, read.queue, byQueue.get(read.queue) ?? {});
    s.reply(read.connId, read.requestId, { type: 'QUEUE_INFO', queue: info });
    return;
  }
  const names = new Set(byQueue.keys());
  for (const q of s.queues.values()) if (q.stored) names.add(q.name);
  const queues = [...names]
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    .map((name) => infoOf(s, name, byQueue.get(name) ?? {}));
  s.reply(read.connId, read.requestId, { type: 'QUEUE_LIST', queues });
}

/**
 * A held change of a queue was answered (or its read failed): the changes
 * that waited behind it go on, in order; one of them may be held in turn,
 * and the rest then wait behind that one.
 */
export function heldChangeSettled(s: CoreState, queue: string): void {
  const waiting = s.queueChangesWaiting.get(queue) ?? [];
  s.queueChangesWaiting.delete(queue);
  for (const { connId, requestId, msg } of waiting) setQueue(s, connId, requestId, msg);
}

function infoOf(s: CoreState, name: string, counts: Partial<Record<JobState, number>>): QueueInfo {
  const info = queueInfoOf(name, s.queues.settingsOf(name));
  info.counts = counts;
  info.running = s.queues.leasedIn(name);
  const leasedByGroup = s.queues.get(name)?.groups;
  info.groups = s.ready.groupBacklog(name, GROUPS_SHOWN).map(({ group, queued }) => ({
    groupKey: group === NO_GROUP ? null : group,
    queued,
    running: leasedByGroup?.get(group)?.leased ?? 0,
  }));
  info.rateLimitedUntilMillis = s.queues.heldUntil(name, s.nowMs);
  const held = s.queues.heldGroups(name, s.nowMs, GROUPS_SHOWN);
  if (held.length > 0) {
    info.heldGroups = held.map(({ group, untilMs }) => ({
      groupKey: group === NO_GROUP ? null : group,
      untilMillis: untilMs,
    }));
  }
  return info;
}
