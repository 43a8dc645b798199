/**
 * Messages between the worker's main thread and its task threads.
 *
 * A thread holds any number of attempts at once (a shared thread many, an
 * isolated thread one). Each message names the attempt it belongs to by its
 * request id, and every `postMessage` carries a batch: all the requests (or
 * outputs) one side produced in one turn of its event loop, so a hundred
 * assignments that arrive together wake a thread once, and a hundred timers
 * that fire together wake the main thread once.
 *
 *   main → thread (ThreadRequest)
 *     RUN_TASK        run one task attempt; `slot` is its stop word
 *     ABORT_TASK      fire the attempt's `ctx.signal` (the attempt was
 *                     cancelled or its deadline passed)
 *     CALL_SETTLED    the answer to one TASK_CALL of the attempt
 *   thread → main (ThreadResponse)
 *     TASK_STARTED    the payload is valid; the handler is now running
 *     TASK_LOG        a line the handler logged through `ctx.log`
 *     TASK_PROGRESS   what the handler reported with `ctx.progress`
 *     TASK_CALL       a call to the coordinator (`ctx.enqueue`): the
 *                     message without its ids, which the main thread adds;
 *                     `callId` is unique within the attempt
 *     TASK_SUCCEEDED  the handler returned; its value, encoded
 *     TASK_FAILED     the handler threw, the payload was invalid, the task
 *                     type is unknown or a task module did not load;
 *                     `rateLimited` when it threw a RateLimitedError
 *     TASK_SUSPENDED  the handler slept or waits (`ctx.sleep`,
 *                     `ctx.waitFor`, `ctx.waitForSignal`,
 *                     `ctx.waitForEvent`): the attempt ends without a result
 *
 * A handler that ignores its aborted signal is not waited for: the main
 * thread terminates the thread after the cancel grace, the only way to stop
 * code that never yields.
 *
 * Beside the messages, each thread shares memory with the main thread
 * ({@link SharedWords}): a message cannot reach a thread whose event loop is
 * held by a computing handler, a shared word can. The main thread raises an
 * attempt's stop in its slot before it posts ABORT_TASK, and the thread reads
 * it whenever the attempt's signal is looked at; the thread writes its memory
 * samples, and the time of its last turn, for the pool.
 */
import {
  RATE_LIMIT_SCOPES,
  type EventWait,
  type JsonObject,
  type ParentResult,
  type RateLimitedResult,
  type RecordedStep,
  type ResultFormat,
  type SignalWait,
} from '../protocol/messages.js';
import type { TraceContext } from '../protocol/trace-context.js';

export interface RunTaskInput {
  type: 'RUN_TASK';
  taskType: string;
  payload: JsonObject;
  jobId: string;
  attemptId: string;
  /** 1-based. */
  attemptNumber: number;
  /** The job's attempt limit; null when the coordinator did not say. */
  maxAttempts: number | null;
  /** Epoch ms of the attempt's deadline; null when unknown. */
  deadlineAtMs: number | null;
  /** The job's parents as the coordinator sent them; null = none. */
  parents?: ParentResult[] | null;
  /** The trace context the handler runs in (the attempt's span, or the job's); null = none. */
  traceContext?: TraceContext | null;
  /**
   * Durable steps: the recorded steps the assignment carried; null or
   * absent = the coordinator does not offer steps (ctx.step refuses).
   */
  steps?: RecordedStep[] | null;
  /** How many steps the job has recorded in all (more than `steps` holds: fetched). */
  stepCount?: number | null;
  /** The coordinator offers signal and event waits (with steps only); absent = no. */
  signals?: boolean | null;
}

/** Why an attempt's signal fired. */
export type AbortReason = 'cancel' | 'deadline';
export const ABORT_REASONS: readonly AbortReason[] = ['cancel', 'deadline'];

export interface AbortTaskInput {
  type: 'ABORT_TASK';
  reason: AbortReason;
}

/** How one call ended: the coordinator's reply, or a refusal (a code and a message). */
export type CallOutcome =
  { ok: true; reply: JsonObject } | { ok: false; code: string; message: string };

export interface CallSettledInput {
  type: 'CALL_SETTLED';
  callId: number;
  outcome: CallOutcome;
}

export type ThreadInput = RunTaskInput | AbortTaskInput | CallSettledInput;

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type TaskLogLevel = (typeof LOG_LEVELS)[number];

export type ThreadOutput =
  | { type: 'TASK_STARTED' }
  | { type: 'TASK_LOG'; level: TaskLogLevel; message: string; fields: Record<string, unknown> }
  | { type: 'TASK_PROGRESS'; fraction: number; message: string | null }
  | { type: 'TASK_CALL'; callId: number; call: JsonObject }
  | { type: 'TASK_SUCCEEDED'; result: string; resultFormat: ResultFormat }
  | {
      type: 'TASK_FAILED';
      error: string;
      retryable: boolean;
      /** The handler threw a RateLimitedError: its wait and scope, as data (no class crosses threads). */
      rateLimited?: RateLimitedResult;
    }
  /** The handler slept or waits (durable steps): the attempt ends without a result. */
  | {
      type: 'TASK_SUSPENDED';
      sleepMillis?: number;
      waitForJobId?: string;
      waitForSignal?: SignalWait;
      waitForEvent?: EventWait;
    };

/** The outputs that end an attempt: after one, nothing more of it counts. */
export type FinalOutput = Extract<
  ThreadOutput,
  { type: 'TASK_SUCCEEDED' | 'TASK_FAILED' | 'TASK_SUSPENDED' }
>;

export function isFinalOutput(output: ThreadOutput): output is FinalOutput {
  return (
    output.type === 'TASK_SUCCEEDED' ||
    output.type === 'TASK_FAILED' ||
    output.type === 'TASK_SUSPENDED'
  );
}

export interface ThreadRequest {
  requestId: number;
  input: ThreadInput;
  /** RUN_TASK only: the attempt's stop slot in the thread's {@link SharedWords}. */
  slot?: number;
}

export interface ThreadResponse {
  requestId: number;
  output: ThreadOutput;
}

/** What a task thread receives as `workerData`. */
export interface TaskThreadData {
  /** The task modules to import. */
  modules: { specifier: string; url: string }[];
  /** {@link sharedBytes} of shared memory: see {@link SharedWords}. */
  shared: SharedArrayBuffer;
  /** An isolated thread (one attempt at a time), or a shared one. */
  isolated: boolean;
}

const MEMORY_MB = 0;
const MEMORY_SAMPLES = 1;
const TURN_AT = 2;
/** Words before the stop slots. */
const HEADER_WORDS = 4;
const REASON_CODES: { readonly [R in AbortReason]: number } = { cancel: 1, deadline: 2 };

/** Bytes of shared memory a thread with `slots` stop slots needs. */
export function sharedBytes(slots: number): number {
  return (HEADER_WORDS + 2 * slots) * 4;
}

/** Milliseconds of the epoch clock, folded into a non-negative int32 (wraps every 24.8 days). */
function clockWord(nowMs: number): number {
  return nowMs % 0x7fffffff;
}

/**
 * The int32 words one task thread shares with the main thread, read and
 * written with Atomics:
 *
 *   0  memory        the thread's heap + external memory at its last sample, in MiB (thread writes)
 *   1  samples       how many samples it has taken, wrapping (thread writes)
 *   2  turn          when its event loop last turned while it held attempts,
 *                    epoch ms folded by {@link clockWord} (thread writes)
 *   3  (unused)
 *   4 + 2s, 5 + 2s   stop slot s: the request id (as int32) of the attempt to
 *                    stop there, and why (main writes, reason first)
 *
 * An attempt owns its slot from its RUN_TASK until the thread has answered
 * it for the last time, so a stop raised in a slot never reaches a later
 * attempt; the request id in it makes a stale stop harmless anyway.
 */
export class SharedWords {
  readonly #words: Int32Array;
  readonly slots: number;

  constructor(buffer: SharedArrayBuffer) {
    this.#words = new Int32Array(buffer);
    this.slots = Math.max(0, Math.floor((this.#words.length - HEADER_WORDS) / 2));
  }

  /** Main thread: asks the attempt `requestId` in `slot` to stop. */
  raiseStop(slot: number, requestId: number, reason: AbortReason): void {
    const at = HEADER_WORDS + 2 * slot;
    Atomics.store(this.#words, at + 1, REASON_CODES[reason]);
    // The id last: a thread that sees it sees the reason too.
    Atomics.store(this.#words, at, requestId | 0);
  }

  /** Main thread: a slot is handed to a new attempt: no stop of an earlier one stays in it. */
  clearStop(slot: number): void {
    Atomics.store(this.#words, HEADER_WORDS + 2 * slot, 0);
  }

  /** Task thread: why the attempt `requestId` in `slot` was asked to stop, or null if it was not. */
  stopRaised(slot: number, requestId: number): AbortReason | null {
    const at = HEADER_WORDS + 2 * slot;
    if (slot < 0 || slot >= this.slots) return null;
    if (Atomics.load(this.#words, at) !== (requestId | 0)) return null;
    return Atomics.load(this.#words, at + 1) === REASON_CODES.deadline ? 'deadline' : 'cancel';
  }

  /** Task thread: records a memory sample, in MiB. */
  recordMemory(usedMb: number): void {
    Atomics.store(this.#words, MEMORY_MB, Math.min(Math.ceil(usedMb), 2 ** 31 - 1));
    Atomics.add(this.#words, MEMORY_SAMPLES, 1);
  }

  /** Main thread: the last memory sample and the sample count. */
  memory(): { usedMb: number; samples: number } {
    return {
      usedMb: Atomics.load(this.#words, MEMORY_MB),
      samples: Atomics.load(this.#words, MEMORY_SAMPLES),
    };
  }

  /** Task thread: its event loop turns now (`Date.now()`). */
  recordTurn(nowMs: number): void {
    Atomics.store(this.#words, TURN_AT, clockWord(nowMs));
  }

  /** Main thread: how long ago the thread's event loop last turned, in ms (0 before it first did). */
  sinceTurnMs(nowMs: number): number {
    const at = Atomics.load(this.#words, TURN_AT);
    if (at === 0) return 0;
    return (clockWord(nowMs) - at + 0x7fffffff) % 0x7fffffff;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const isNullableNumber = (value: unknown): boolean => value === null || typeof value === 'number';
const isNullableString = (value: unknown): boolean => value === null || typeof value === 'string';

/*
 * On the wire between the threads each request and output is a tuple, not
 * an object: the structured clone that carries a message costs about four
 * times as much for an object as for an array of the same fields (every key
 * is written and an object built property by property), which for an
 * attempt's RUN_TASK was most of its hop (docs/MEASURED_BEHAVIOR.md). The
 * first element names the message; `encode…` and `decode…` are the only
 * code that knows the layout.
 */
const REQUEST = { RUN_TASK: 0, ABORT_TASK: 1, CALL_SETTLED: 2 } as const;
const OUTPUT = {
  TASK_STARTED: 0,
  TASK_LOG: 1,
  TASK_PROGRESS: 2,
  TASK_CALL: 3,
  TASK_SUCCEEDED: 4,
  TASK_FAILED: 5,
  TASK_SUSPENDED: 6,
} as const;

/** A request as it crosses to a task thread. */
export type WireRequest = readonly unknown[];
/** An output as it crosses back. */
export type WireResponse = readonly unknown[];

export function encodeRequest({ requestId, input, slot }: ThreadRequest): WireRequest {
  switch (input.type) {
    case 'RUN_TASK':
      return [
        REQUEST.RUN_TASK,
        requestId,
        slot ?? 0,
        input.taskType,
        input.payload,
        input.jobId,
        input.attemptId,
        input.attemptNumber,
        input.maxAttempts,
        input.deadlineAtMs,
        input.parents ?? null,
        input.traceContext ?? null,
        input.steps ?? null,
        input.stepCount ?? null,
        input.signals === true,
      ];
    case 'ABORT_TASK':
      return [REQUEST.ABORT_TASK, requestId, input.reason === 'deadline' ? 1 : 0];
    case 'CALL_SETTLED':
      return [REQUEST.CALL_SETTLED, requestId, input.callId, input.outcome];
  }
}

/** A request read on the thread side; null for anything the pool never sends. */
export function decodeRequest(wire: unknown): ThreadRequest | null {
  if (!Array.isArray(wire) || typeof wire[1] !== 'number') return null;
  const requestId = wire[1];
  switch (wire[0]) {
    case REQUEST.RUN_TASK:
      return decodeRun(wire, requestId);
    case REQUEST.ABORT_TASK:
      return {
        requestId,
        input: { type: 'ABORT_TASK', reason: wire[2] === 1 ? 'deadline' : 'cancel' },
      };
    case REQUEST.CALL_SETTLED: {
      const [, , callId, outcome] = wire as unknown[];
      if (typeof callId !== 'number' || !isCallOutcome(outcome)) return null;
      return { requestId, input: { type: 'CALL_SETTLED', callId, outcome } };
    }
    default:
      return null;
  }
}

function decodeRun(wire: unknown[], requestId: number): ThreadRequest | null {
  const [, , slot, taskType, payload, jobId, attemptId, attemptNumber, maxAttempts] = wire;
  const [deadlineAtMs, parents, traceContext, steps, stepCount, signals] = wire.slice(9);
  if (
    typeof slot !== 'number' ||
    typeof taskType !== 'string' ||
    !isRecord(payload) ||
    typeof jobId !== 'string' ||
    typeof attemptId !== 'string' ||
    typeof attemptNumber !== 'number' ||
    !isNullableNumber(maxAttempts) ||
    !isNullableNumber(deadlineAtMs) ||
    !(parents === null || Array.isArray(parents)) ||
    !(
      traceContext === null ||
      (isRecord(traceContext) && typeof traceContext.traceparent === 'string')
    ) ||
    !(steps === null || Array.isArray(steps)) ||
    !isNullableNumber(stepCount)
  ) {
    return null;
  }
  const input: RunTaskInput = {
    type: 'RUN_TASK',
    taskType,
    payload: payload as JsonObject,
    jobId,
    attemptId,
    attemptNumber,
    maxAttempts: maxAttempts as number | null,
    deadlineAtMs: deadlineAtMs as number | null,
    parents: parents as ParentResult[] | null,
    traceContext: traceContext as TraceContext | null,
    steps: steps as RecordedStep[] | null,
    stepCount: stepCount as number | null,
    signals: signals === true,
  };
  return { requestId, input, slot };
}

export function encodeResponse({ requestId, output }: ThreadResponse): WireResponse {
  switch (output.type) {
    case 'TASK_STARTED':
      return [OUTPUT.TASK_STARTED, requestId];
    case 'TASK_LOG':
      return [OUTPUT.TASK_LOG, requestId, output.level, output.message, output.fields];
    case 'TASK_PROGRESS':
      return [OUTPUT.TASK_PROGRESS, requestId, output.fraction, output.message];
    case 'TASK_CALL':
      return [OUTPUT.TASK_CALL, requestId, output.callId, output.call];
    case 'TASK_SUCCEEDED':
      return [OUTPUT.TASK_SUCCEEDED, requestId, output.result, output.resultFormat];
    case 'TASK_FAILED':
      return [
        OUTPUT.TASK_FAILED,
        requestId,
        output.error,
        output.retryable,
        output.rateLimited ?? null,
      ];
    case 'TASK_SUSPENDED':
      return [
        OUTPUT.TASK_SUSPENDED,
        requestId,
        output.sleepMillis ?? null,
        output.waitForJobId ?? null,
        output.waitForSignal ?? null,
        output.waitForEvent ?? null,
      ];
  }
}

/** An output read on the main side; null for anything a task thread never sends. */
export function decodeResponse(wire: unknown): ThreadResponse | null {
  if (!Array.isArray(wire) || typeof wire[1] !== 'number') return null;
  const output = decodeOutput(wire as unknown[]);
  return output === null ? null : { requestId: wire[1], output };
}

function decodeOutput(wire: unknown[]): ThreadOutput | null {
  const [kind, , a, b, c, d] = wire;
  switch (kind) {
    case OUTPUT.TASK_STARTED:
      return { type: 'TASK_STARTED' };
    case OUTPUT.TASK_LOG:
      return LOG_LEVELS.includes(a as TaskLogLevel) && typeof b === 'string' && isRecord(c)
        ? { type: 'TASK_LOG', level: a as TaskLogLevel, message: b, fields: c }
        : null;
    case OUTPUT.TASK_PROGRESS:
      return typeof a === 'number' && isNullableString(b)
        ? { type: 'TASK_PROGRESS', fraction: a, message: b as string | null }
        : null;
    case OUTPUT.TASK_CALL:
      return typeof a === 'number' && isRecord(b) && typeof b.type === 'string'
        ? { type: 'TASK_CALL', callId: a, call: b as JsonObject }
        : null;
    case OUTPUT.TASK_SUCCEEDED:
      return typeof a === 'string' && (b === 'text' || b === 'json')
        ? { type: 'TASK_SUCCEEDED', result: a, resultFormat: b }
        : null;
    case OUTPUT.TASK_FAILED:
      if (typeof a !== 'string' || typeof b !== 'boolean') return null;
      if (c === null || c === undefined) return { type: 'TASK_FAILED', error: a, retryable: b };
      if (!isRateLimited(c)) return null;
      return {
        type: 'TASK_FAILED',
        error: a,
        retryable: b,
        rateLimited: { retryAfterMillis: c.retryAfterMillis, scope: c.scope },
      };
    case OUTPUT.TASK_SUSPENDED:
      if (typeof a === 'number') return { type: 'TASK_SUSPENDED', sleepMillis: a };
      if (typeof b === 'string') return { type: 'TASK_SUSPENDED', waitForJobId: b };
      if (isRecord(c) && typeof c.name === 'string') {
        return { type: 'TASK_SUSPENDED', waitForSignal: c as unknown as SignalWait };
      }
      if (isRecord(d) && typeof d.name === 'string') {
        return { type: 'TASK_SUSPENDED', waitForEvent: d as unknown as EventWait };
      }
      return null;
    default:
      return null;
  }
}

function isRateLimited(value: unknown): value is RateLimitedResult {
  return (
    isRecord(value) &&
    typeof value.retryAfterMillis === 'number' &&
    RATE_LIMIT_SCOPES.includes(value.scope as RateLimitedResult['scope'])
  );
}

function isCallOutcome(value: unknown): value is CallOutcome {
  if (!isRecord(value)) return false;
  if (value.ok === true) return isRecord(value.reply);
  return value.ok === false && typeof value.code === 'string' && typeof value.message === 'string';
}

/** Checks the `workerData` a task thread was started with. */
export function isTaskThreadData(value: unknown): value is TaskThreadData {
  return (
    isRecord(value) &&
    value.shared instanceof SharedArrayBuffer &&
    value.shared.byteLength >= sharedBytes(0) &&
    typeof value.isolated === 'boolean' &&
    Array.isArray(value.modules) &&
    value.modules.every(
      (m: unknown) => isRecord(m) && typeof m.specifier === 'string' && typeof m.url === 'string',
    )
  );
}

/**
 * Collects what one side posts in a turn and sends it as one batch: the
 * first item of a turn schedules the flush (`schedule`: a microtask on the
 * main thread, so what a socket read assigns leaves at the end of that read;
 * the next turn on a task thread, so whatever many handlers finish together
 * leaves together).
 */
export class Outbox<T> {
  #items: T[] = [];
  readonly #send: (items: T[]) => void;
  readonly #schedule: (flush: () => void) => void;

  constructor(send: (items: T[]) => void, schedule: (flush: () => void) => void) {
    this.#send = send;
    this.#schedule = schedule;
  }

  push(item: T): void {
    if (this.#items.length === 0) this.#schedule(() => this.flush());
    this.#items.push(item);
  }

  /** Sends what is waiting now (nothing when empty). */
  flush(): void {
    if (this.#items.length === 0) return;
    const items = this.#items;
    this.#items = [];
    this.#send(items);
  }
}
