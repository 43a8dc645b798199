/**
 * Signals to one job, events to every job that listens, and triggers.
 *
 * A signal (SIGNAL_JOB) is held by its job until a `ctx.waitForSignal` of
 * its name takes it: the oldest first, each once. The taking is a step of
 * the job (`dtp.waitForSignal`, its value the signal) written in the same
 * commit as the signal's row marked consumed, so a replay of the handler
 * finds the same signal at the same call and no other call can take it.
 * A wait that finds a held signal takes it at once (the job is queued
 * again); otherwise the job is WAITING until one comes or its timeout.
 *
 * An event (PUBLISH_EVENT) is not held: it wakes every job waiting for its
 * name (and key, when the wait names one) at that moment, and makes one job
 * per trigger of its name, all in the commit that stores the event. Its id
 * makes a publish idempotent: a known id does nothing again and gets the
 * first reply.
 *
 * Everything here happens in the single writer; a WAITING job's wait is a
 * step of the job (its value names what it waits for), so recovery finds
 * it again; the signals not taken come back with the active jobs.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import {
  MAX_ATTEMPTS_LIMIT,
  MAX_DELAY_MS,
  MAX_EVENT_ID_LENGTH,
  MAX_EVENT_WAITERS,
  MAX_SIGNAL_PAYLOAD_BYTES,
  MAX_SIGNALS_HELD,
  MAX_TRIGGERS,
  MAX_TRIGGERS_PER_EVENT,
} from '../../protocol/limits.js';
import type {
  DeleteTrigger,
  EventPublished,
  EventWait,
  JsonObject,
  JsonValue,
  PublishEvent,
  SetTrigger,
  SignalJob,
  SignalWait,
  TriggerSnapshot,
} from '../../protocol/messages.js';
import { DEFAULT_QUEUE, queueNameProblem } from '../../protocol/queue-names.js';
import { isValidTaskType } from '../../protocol/task-types.js';
import type { JobRecord, TriggerRecord } from '../../store/store.js';
import type { Awaiting, CoreJob, HeldSignal, JobStep, RunningJob } from './job.js';
import { isTerminalState } from './job-state.js';
import { releaseWaiting, schedule } from './job-lifecycle.js';
import { loadFar, memoryJob } from './scheduled-window.js';
import { EVENT_WAIT_STEP, SIGNAL_WAIT_STEP } from './step-names.js';
import type { CoreState } from './state.js';
import { createJob, refusalOf } from './submission.js';
import { suspend } from './suspension.js';

/** Most events whose reply memory keeps for a repeated id (older ones are read from the store). */
const RECENT_EVENTS = 10_000;

/** What a JSON value costs as stored, or null when it is over the bound. */
function payloadText(value: JsonValue): string | null {
  const text = JSON.stringify(value ?? null);
  return Buffer.byteLength(text) > MAX_SIGNAL_PAYLOAD_BYTES ? null : text;
}

function nameProblem(what: string, name: string): string | null {
  const problem = queueNameProblem(name);
  return problem === null ? null : `${what} ${problem}`;
}

// ---------------------------------------------------------------- signals

/** SIGNAL_JOB. */
export function signalJob(s: CoreState, connId: number, requestId: number, msg: SignalJob): void {
  const problem = nameProblem('name', msg.name);
  if (problem !== null) {
    return s.replyError(connId, requestId, ErrorCode.InvalidRequest, `Invalid request: ${problem}`);
  }
  const payloadJson = payloadText(msg.payload);
  if (payloadJson === null) {
    return s.replyError(
      connId,
      requestId,
      ErrorCode.InvalidRequest,
      `Invalid request: a signal's payload is at most ${MAX_SIGNAL_PAYLOAD_BYTES} bytes of JSON`,
    );
  }
  const job = memoryJob(s, msg.jobId);
  if (job !== undefined) return deliver(s, connId, requestId, job, msg.name, payloadJson);
  // Not in memory: ended and gone, far in the future, or unknown; the store says which.
  s.read(
    { op: 'job', jobId: msg.jobId, withAttempts: false },
    { kind: 'signal', connId, requestId, jobId: msg.jobId, name: msg.name, payloadJson },
  );
}

/** The store answered for a signal's job that memory did not hold. */
export function signalJobRead(
  s: CoreState,
  read: { connId: number; requestId: number; jobId: string; name: string; payloadJson: string },
  row: JobRecord | null,
): void {
  const { connId, requestId } = read;
  let job = memoryJob(s, read.jobId);
  if (job === undefined && row !== null && row.state === 'SCHEDULED') job = loadFar(s, row);
  if (job !== undefined) return deliver(s, connId, requestId, job, read.name, read.payloadJson);
  if (row === null) {
    return s.replyError(
      connId,
      requestId,
      ErrorCode.UnknownJob,
      `Unknown job: ${read.jobId.slice(0, 200)}`,
    );
  }
  refuseEnded(s, connId, requestId, row.jobId, row.state);
}

function refuseEnded(
  s: CoreState,
  connId: number,
  requestId: number,
  jobId: string,
  state: string,
): void {
  s.replyError(
    connId,
    requestId,
    ErrorCode.InvalidRequest,
    `Invalid request: job ${jobId} has ended (${state}); a signal goes only to a job that has not`,
  );
}

function deliver(
  s: CoreState,
  connId: number,
  requestId: number,
  job: CoreJob,
  name: string,
  payloadJson: string,
): void {
  if (isTerminalState(job.state)) return refuseEnded(s, connId, requestId, job.jobId, job.state);
  const held = (job.signals ??= []);
  const seq = nextSeq(s, job);
  const signal: HeldSignal = { seq, name, payloadJson, atMs: s.nowMs };
  const awaiting = job.state === 'WAITING' ? (job.awaiting ?? null) : null;
  const resumed = awaiting !== null && awaiting.kind === 'signal' && awaiting.name === name;
  if (!resumed && held.length >= MAX_SIGNALS_HELD) {
    return s.replyError(
      connId,
      requestId,
      ErrorCode.LimitExceeded,
      `job ${job.jobId} holds ${held.length} signals no wait has taken (at most ${MAX_SIGNALS_HELD})`,
    );
  }
  s.jobs.saveSignal({ jobId: job.jobId, ...signal, consumed: resumed });
  s.emit({ type: 'job.signalled', jobId: job.jobId, name, resumed });
  if (resumed) resume(s, job, SIGNAL_WAIT_STEP, { signal: signalValue(signal) });
  else held.push(signal);
  s.reply(connId, requestId, {
    type: 'JOB_SIGNALLED',
    jobId: job.jobId,
    name,
    resumed,
    signalsHeld: held.length,
  });
  if (resumed) schedule(s);
}

/** A signal's number within its job: increasing, across restarts too (it starts from the clock). */
function nextSeq(s: CoreState, job: CoreJob): number {
  const last = job.signals?.at(-1)?.seq ?? 0;
  return Math.max(last + 1, s.nowMs * 1_000);
}

function signalValue(signal: HeldSignal): { name: string; payload: unknown; atMillis: number } {
  return { name: signal.name, payload: JSON.parse(signal.payloadJson), atMillis: signal.atMs };
}

// ---------------------------------------------------------------- waits

/** What is wrong with a TASK_SUSPEND's signal or event wait, or null. */
export function waitProblem(wait: SignalWait | EventWait, what: string): string | null {
  const problem = nameProblem(`${what}.name`, wait.name);
  if (problem !== null) return problem;
  const key = 'key' in wait ? (wait.key ?? null) : null;
  if (key !== null && (key.length === 0 || key.length > MAX_EVENT_ID_LENGTH)) {
    return `${what}.key must be 1..${MAX_EVENT_ID_LENGTH} characters`;
  }
  const timeout = wait.timeoutMillis ?? null;
  if (timeout !== null && !(timeout >= 0 && timeout <= MAX_DELAY_MS)) {
    return `${what}.timeoutMillis must be 0..${MAX_DELAY_MS}`;
  }
  return null;
}

/**
 * `ctx.waitForSignal`: takes the oldest held signal of that name at once
 * (the job is queued again), or the job waits for one.
 */
export function waitForSignal(s: CoreState, job: RunningJob, wait: SignalWait): void {
  const awaiting: Awaiting = {
    kind: 'signal',
    name: wait.name,
    key: null,
    untilMs: untilOf(s, wait.timeoutMillis),
  };
  const held = job.signals ?? [];
  const index = held.findIndex((signal) => signal.name === wait.name);
  beginWait(s, job, SIGNAL_WAIT_STEP, awaiting);
  if (index < 0) return;
  const [signal] = held.splice(index, 1) as [HeldSignal];
  s.jobs.saveSignal({ jobId: job.jobId, ...signal, consumed: true });
  resume(s, job, SIGNAL_WAIT_STEP, { signal: signalValue(signal) });
}

/** `ctx.waitForEvent`: the job waits for the next event of that name (and key). */
export function waitForEvent(s: CoreState, job: RunningJob, wait: EventWait): void {
  const waiters = s.eventWaiters.get(wait.name);
  if (waiters !== undefined && waiters.size >= MAX_EVENT_WAITERS) {
    throw new WaitRefused(
      `${waiters.size} jobs wait for event ${wait.name} already (at most ${MAX_EVENT_WAITERS})`,
    );
  }
  const awaiting: Awaiting = {
    kind: 'event',
    name: wait.name,
    key: wait.key ?? null,
    untilMs: untilOf(s, wait.timeoutMillis),
  };
  beginWait(s, job, EVENT_WAIT_STEP, awaiting);
}

/** A wait the coordinator will not begin (a bound); the attempt fails, not retryable. */
export class WaitRefused extends Error {}

function untilOf(s: CoreState, timeoutMillis: number | null | undefined): number | null {
  return timeoutMillis === null || timeoutMillis === undefined ? null : s.nowMs + timeoutMillis;
}

function beginWait(s: CoreState, job: RunningJob, stepName: string, awaiting: Awaiting): void {
  const waitingFor =
    awaiting.kind === 'signal'
      ? { signal: awaiting.name, untilMillis: awaiting.untilMs }
      : { event: awaiting.name, key: awaiting.key, untilMillis: awaiting.untilMs };
  suspend(s, job, 'WAITING', awaiting.untilMs, null, { name: stepName, value: { waitingFor } });
  holdAwaiting(s, job, awaiting);
  s.jobs.save(job);
}

/** Indexes a WAITING job's signal or event wait (also at recovery). */
export function holdAwaiting(s: CoreState, job: CoreJob, awaiting: Awaiting): void {
  job.awaiting = awaiting;
  if (awaiting.kind === 'event') {
    let waiters = s.eventWaiters.get(awaiting.name);
    if (waiters === undefined) s.eventWaiters.set(awaiting.name, (waiters = new Set()));
    waiters.add(job.jobId);
  }
  if (awaiting.untilMs !== null) {
    s.waitTimeouts.push({ atMs: awaiting.untilMs, jobId: job.jobId, attemptId: null });
  }
}

/**
 * The wait's step gets its value (or the JSON text of it, made once for the
 * many jobs an event wakes) and the job is queued again (its handler
 * replays up to it).
 */
function resume(
  s: CoreState,
  job: CoreJob,
  stepName: string,
  value: unknown,
  text = JSON.stringify(value),
): void {
  const index = job.steps.length - 1;
  const step = job.steps[index];
  if (job.state !== 'WAITING' || step === undefined || step.name !== stepName) {
    throw new Error(`job ${job.jobId} resumes a ${stepName} it is not in (${job.state})`);
  }
  const ended: JobStep = { ...step, result: text };
  job.steps[index] = ended;
  s.jobs.saveStep(job.jobId, index, ended);
  const awaiting = job.awaiting ?? null;
  job.awaiting = null;
  if (awaiting?.kind === 'event') s.eventWaiters.get(awaiting.name)?.delete(job.jobId);
  s.emit({ type: 'job.resumed', jobId: job.jobId, by: stepName });
  releaseWaiting(s, job);
}

/** Ends the waits whose timeout came: their value is null. */
export function timeOutWaits(s: CoreState): void {
  for (
    let due = s.waitTimeouts.peek();
    due !== undefined && due.atMs <= s.nowMs;
    due = s.waitTimeouts.peek()
  ) {
    s.waitTimeouts.pop();
    const job = s.jobs.active(due.jobId);
    const awaiting = job?.awaiting ?? null;
    if (job === undefined || job.state !== 'WAITING' || awaiting?.untilMs !== due.atMs) continue;
    if (awaiting.kind === 'signal') resume(s, job, SIGNAL_WAIT_STEP, { signal: null });
    else resume(s, job, EVENT_WAIT_STEP, { event: null });
  }
}

/** The earliest wait timeout held (maybe of a wait that ended: a wake-up then does nothing). */
export function nextWaitTimeoutAtMs(s: CoreState): number | null {
  return s.waitTimeouts.peek()?.atMs ?? null;
}

/**
 * Recovery: a WAITING job whose last step is a signal or event wait still
 * pending waits again (a signal it holds that the wait could take ends it
 * at once; none can, since a signal that came while it waited was taken).
 */
export function recoverAwaiting(s: CoreState, job: CoreJob): boolean {
  const last = job.steps.at(-1);
  if (last === undefined || last.result === null) return false;
  if (last.name !== SIGNAL_WAIT_STEP && last.name !== EVENT_WAIT_STEP) return false;
  const value = JSON.parse(last.result) as {
    waitingFor?: {
      signal?: string;
      event?: string;
      key?: string | null;
      untilMillis?: number | null;
    };
  };
  const w = value.waitingFor;
  if (w === undefined) return false;
  const awaiting: Awaiting =
    last.name === SIGNAL_WAIT_STEP
      ? { kind: 'signal', name: w.signal ?? '', key: null, untilMs: w.untilMillis ?? null }
      : { kind: 'event', name: w.event ?? '', key: w.key ?? null, untilMs: w.untilMillis ?? null };
  holdAwaiting(s, job, awaiting);
  return true;
}

// ---------------------------------------------------------------- events

interface HeldPublish {
  readonly connId: number;
  readonly requestId: number;
  readonly msg: PublishEvent;
  readonly payloadJson: string;
}

/** PUBLISH_EVENT. */
export function publishEvent(
  s: CoreState,
  connId: number,
  requestId: number,
  msg: PublishEvent,
): void {
  const problem = publishProblem(msg);
  if (problem !== null) {
    return s.replyError(connId, requestId, ErrorCode.InvalidRequest, `Invalid request: ${problem}`);
  }
  const payloadJson = payloadText(msg.payload) as string;
  const held: HeldPublish = { connId, requestId, msg, payloadJson };
  const eventId = msg.eventId ?? null;
  if (eventId === null) return publish(s, held, s.deps.newId());
  const known = s.recentEvents.get(eventId);
  if (known !== undefined) return answerKnown(s, held, known);
  const waiting = s.eventLookups.get(eventId);
  if (waiting !== undefined) {
    waiting.push(held);
    return;
  }
  s.eventLookups.set(eventId, [held]);
  s.read({ op: 'event', eventId }, { kind: 'event', eventId });
}

function publishProblem(msg: PublishEvent): string | null {
  const problem = nameProblem('name', msg.name);
  if (problem !== null) return problem;
  for (const [field, value] of [
    ['key', msg.key],
    ['eventId', msg.eventId],
  ] as const) {
    if (value != null && (value.length === 0 || value.length > MAX_EVENT_ID_LENGTH)) {
      return `${field} must be 1..${MAX_EVENT_ID_LENGTH} characters`;
    }
  }
  if (payloadText(msg.payload) === null) {
    return `an event's payload is at most ${MAX_SIGNAL_PAYLOAD_BYTES} bytes of JSON`;
  }
  return null;
}

/** The store answered for an event id: the publishes held for it go on, in order. */
export function eventLookedUp(s: CoreState, eventId: string, stored: EventPublished | null): void {
  const held = s.eventLookups.get(eventId) ?? [];
  s.eventLookups.delete(eventId);
  for (const h of held) {
    const known = s.recentEvents.get(eventId) ?? stored;
    if (known !== null) answerKnown(s, h, known);
    else publish(s, h, eventId);
  }
}

/** An event-id lookup failed: its publishes get an error; nothing was done. */
export function eventLookupFailed(s: CoreState, eventId: string, message: string): void {
  const held = s.eventLookups.get(eventId) ?? [];
  s.eventLookups.delete(eventId);
  for (const h of held) {
    s.replyError(
      h.connId,
      h.requestId,
      ErrorCode.StoreReadFailed,
      `Could not check the event id: ${message}`,
    );
  }
}

function answerKnown(s: CoreState, held: HeldPublish, known: EventPublished): void {
  s.reply(held.connId, held.requestId, { ...known, duplicate: true });
}

/** An event's job payload: the event's, or `{value}` for a payload that is not an object. */
function jobPayloadOf(payloadJson: string): string {
  const value = JSON.parse(payloadJson) as JsonValue;
  const isObject = typeof value === 'object' && value !== null && !Array.isArray(value);
  return isObject ? payloadJson : JSON.stringify({ value } satisfies JsonObject);
}

function publish(s: CoreState, held: HeldPublish, eventId: string): void {
  const { connId, requestId, msg, payloadJson } = held;
  const triggers = [...(s.triggersByEvent.get(msg.name) ?? [])]
    .map((name) => s.triggers.get(name))
    .filter((t): t is TriggerRecord => t !== undefined)
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  // A trigger's job is admitted like any new job; the event is refused whole when one is not.
  if (triggers.length > 0) {
    const refusal = refusalOf(s, false);
    const room = s.config.maxActiveJobs - (s.jobs.activeCount - s.scheduledCount);
    if (refusal !== null || room < triggers.length) {
      return s.replyError(
        connId,
        requestId,
        ErrorCode.LimitExceeded,
        `too many active jobs for the ${triggers.length} jobs of this event's triggers; retry later`,
      );
    }
  }
  const jobPayload = triggers.length > 0 ? jobPayloadOf(payloadJson) : '';
  const jobIds: string[] = [];
  for (const trigger of triggers) {
    const job = createJob(s, {
      taskType: trigger.taskType,
      payloadJson: jobPayload,
      priority: trigger.priority ?? 'NORMAL',
      maxAttempts: trigger.maxAttempts ?? s.config.defaultMaxAttempts,
      timeoutMs: s.config.taskTimeoutMs,
      idempotencyKey: null,
      runAtMs: null,
      scheduleName: null,
      queue: trigger.queue,
      groupKey: null,
      dependsOn: null,
      onParentFailure: null,
      traceContext: null,
    });
    jobIds.push(job.jobId);
  }
  const key = msg.key ?? null;
  const value = {
    event: {
      name: msg.name,
      payload: JSON.parse(payloadJson) as unknown,
      key,
      eventId,
      atMillis: s.nowMs,
    },
  };
  const text = JSON.stringify(value);
  let resumed = 0;
  const waiters = s.eventWaiters.get(msg.name);
  for (const jobId of [...(waiters ?? [])]) {
    const job = s.jobs.active(jobId);
    const awaiting = job?.awaiting ?? null;
    if (job === undefined || job.state !== 'WAITING' || awaiting?.kind !== 'event') {
      waiters?.delete(jobId);
      continue;
    }
    if (awaiting.name !== msg.name || (awaiting.key !== null && awaiting.key !== key)) continue;
    resume(s, job, EVENT_WAIT_STEP, value, text);
    resumed++;
  }
  if (waiters !== undefined && waiters.size === 0) s.eventWaiters.delete(msg.name);
  s.jobs.saveEvent({ eventId, name: msg.name, key, payloadJson, atMs: s.nowMs, jobIds, resumed });
  const reply: EventPublished = { type: 'EVENT_PUBLISHED', eventId, jobIds, resumed };
  rememberEvent(s, eventId, reply);
  s.emit({ type: 'event.published', eventId, name: msg.name, jobs: jobIds.length, resumed });
  s.reply(connId, requestId, reply);
  schedule(s);
}

function rememberEvent(s: CoreState, eventId: string, reply: EventPublished): void {
  s.recentEvents.set(eventId, reply);
  if (s.recentEvents.size > RECENT_EVENTS) {
    const oldest = s.recentEvents.keys().next().value as string;
    s.recentEvents.delete(oldest);
  }
}

// ---------------------------------------------------------------- triggers

function triggerSnapshot(t: TriggerRecord): TriggerSnapshot {
  return {
    name: t.name,
    event: t.event,
    taskType: t.taskType,
    queue: t.queue,
    priority: t.priority,
    maxAttempts: t.maxAttempts,
    createdAtMillis: t.createdAtMs,
    updatedAtMillis: t.updatedAtMs,
  };
}

/** SET_TRIGGER: creates or replaces a trigger. */
export function setTrigger(s: CoreState, connId: number, requestId: number, msg: SetTrigger): void {
  const t = msg.trigger;
  const problem =
    nameProblem('trigger name', t.name) ??
    nameProblem('event', t.event) ??
    (isValidTaskType(t.taskType)
      ? null
      : `taskType ${JSON.stringify(t.taskType.slice(0, 80))} is not a task type`) ??
    (t.queue == null ? null : nameProblem('queue', t.queue)) ??
    (t.maxAttempts == null || (t.maxAttempts >= 1 && t.maxAttempts <= MAX_ATTEMPTS_LIMIT)
      ? null
      : `maxAttempts must be 1..${MAX_ATTEMPTS_LIMIT}`);
  if (problem !== null) {
    return s.replyError(connId, requestId, ErrorCode.InvalidRequest, `Invalid request: ${problem}`);
  }
  const existing = s.triggers.get(t.name);
  const sameEvent = existing !== undefined && existing.event === t.event;
  const forEvent = s.triggersByEvent.get(t.event)?.size ?? 0;
  if (existing === undefined && s.triggers.size >= MAX_TRIGGERS) {
    return s.replyError(
      connId,
      requestId,
      ErrorCode.LimitExceeded,
      `at most ${MAX_TRIGGERS} triggers`,
    );
  }
  if (!sameEvent && forEvent >= MAX_TRIGGERS_PER_EVENT) {
    return s.replyError(
      connId,
      requestId,
      ErrorCode.LimitExceeded,
      `event ${t.event} has ${forEvent} triggers already (at most ${MAX_TRIGGERS_PER_EVENT})`,
    );
  }
  const record: TriggerRecord = {
    name: t.name,
    event: t.event,
    taskType: t.taskType,
    queue: t.queue ?? DEFAULT_QUEUE,
    priority: t.priority ?? null,
    maxAttempts: t.maxAttempts ?? null,
    createdAtMs: existing?.createdAtMs ?? s.nowMs,
    updatedAtMs: s.nowMs,
  };
  putTrigger(s, record);
  s.jobs.saveTrigger(record);
  s.reply(connId, requestId, { type: 'TRIGGER_INFO', trigger: triggerSnapshot(record) });
}

/** Holds a trigger in memory (a new one, or one found at recovery). */
export function putTrigger(s: CoreState, record: TriggerRecord): void {
  const existing = s.triggers.get(record.name);
  if (existing !== undefined) s.triggersByEvent.get(existing.event)?.delete(record.name);
  s.triggers.set(record.name, record);
  let names = s.triggersByEvent.get(record.event);
  if (names === undefined) s.triggersByEvent.set(record.event, (names = new Set()));
  names.add(record.name);
}

export function listTriggers(s: CoreState, connId: number, requestId: number): void {
  const triggers = [...s.triggers.values()]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map(triggerSnapshot);
  s.reply(connId, requestId, { type: 'TRIGGER_LIST', triggers });
}

export function deleteTrigger(
  s: CoreState,
  connId: number,
  requestId: number,
  msg: DeleteTrigger,
): void {
  const existing = s.triggers.get(msg.name);
  if (existing !== undefined) {
    s.triggers.delete(msg.name);
    const names = s.triggersByEvent.get(existing.event);
    names?.delete(msg.name);
    if (names !== undefined && names.size === 0) s.triggersByEvent.delete(existing.event);
    s.jobs.deleteTrigger(msg.name);
  }
  s.reply(connId, requestId, {
    type: 'TRIGGER_DELETED',
    name: msg.name,
    deleted: existing !== undefined,
  });
}
