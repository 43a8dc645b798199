/**
 * LIST_QUEUES and SET_QUEUE: the named queues as clients see them, and
 * changes to their settings (pause, resume, limits).
 *
 * A change is applied to the core at once (the scheduler obeys it from this
 * input on) and written with this input's batch; the reply, which carries
 * the queue's job counts as the store has them, leaves after that commit.
 * A queue is listed once it has a stored job or a setting.
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

export function listQueues(s: CoreState, connId: number, requestId: number): void {
  s.read({ op: 'queueCounts', queue: null }, { kind: 'queues', connId, requestId, queue: null });
}

export function setQueue(s: CoreState, connId: number, requestId: number, msg: SetQueue): void {
  const next = changedSettings(s, msg);
  if (typeof next === 'string') {
    s.replyError(connId, requestId, ErrorCode.InvalidRequest, `Invalid request: ${next}`);
    return;
  }
  s.jobs.saveQueue(s.queues.set(msg.name, next, s.nowMs));
  // Held groups are looked at again under the new limits.
  s.ready.unpark(msg.name);
  s.read(
    { op: 'queueCounts', queue: msg.name },
    { kind: 'queues', connId, requestId, queue: msg.name },
  );
  schedule(s);
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
  return info;
}
