/**
 * Messages between the worker's main thread and its task threads.
 *
 * Every message travels in an envelope that pairs it with the request it
 * belongs to: main → thread `{ requestId, input }`, thread → main
 * `{ requestId, output }`. Both payloads are unions tagged by `type`:
 *
 *   input   RUN_TASK        run one task attempt
 *           ABORT_TASK      fire the running attempt's `ctx.signal` (the
 *                           attempt was cancelled or its deadline passed);
 *                           same requestId as its RUN_TASK
 *           CALL_SETTLED    the answer to one TASK_CALL of the running
 *                           attempt (same requestId, the call's callId)
 *   output  TASK_STARTED    the payload is valid; the handler is now running
 *           TASK_LOG        a line the handler logged through `ctx.log`
 *           TASK_PROGRESS   what the handler reported with `ctx.progress`
 *           TASK_CALL       a call to the coordinator (`ctx.enqueue`): the
 *                           message without its ids, which the main thread
 *                           adds; `callId` is unique within the attempt
 *           TASK_SUCCEEDED  the handler returned; its value, encoded
 *           TASK_FAILED     the handler threw, the payload was invalid, the
 *                           task type is unknown or a task module did not load
 *           TASK_SUSPENDED  the handler slept or waits (`ctx.sleep`,
 *                           `ctx.waitFor`): the attempt ends without a result
 *
 * A thread runs at most one attempt at a time. While it runs one, the main
 * thread may offer it the next (a RUN_TASK whose envelope has a `claimSlot`): the thread
 * keeps it and starts it as soon as the running attempt ends, without
 * waiting for the main thread to hear of that end. An offer is only taken
 * if the thread claims it first in its shared claim word; the main thread
 * may withdraw an offer the thread has not claimed yet (to run it elsewhere,
 * or to cancel it), and whichever of the two swaps the word first wins.
 *
 * A handler that ignores its
 * aborted signal is not waited for: the main thread terminates the thread
 * after the cancel grace, the only way to stop code that never yields.
 *
 * Beside the messages, each thread shares a few words of memory with the
 * main thread ({@link SharedWords}): a message cannot reach a thread whose
 * event loop is held by a computing handler, a shared word can. The main
 * thread raises a stop there before it posts ABORT_TASK, and the thread reads
 * it whenever the attempt's signal is looked at; the thread writes its memory
 * samples there for the pool's memory budget.
 */
import type { JsonObject, ParentResult, RecordedStep, ResultFormat } from '../protocol/messages.js';
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
}

/** The two claim words of a thread: at most two offers to it are open at once. */
export type ClaimSlot = 0 | 1;

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
  | { type: 'TASK_FAILED'; error: string; retryable: boolean }
  /** The handler slept or waits (durable steps): the attempt ends without a result. */
  | { type: 'TASK_SUSPENDED'; sleepMillis?: number; waitForJobId?: string };

export interface ThreadRequest {
  requestId: number;
  input: ThreadInput;
  /**
   * A RUN_TASK that is an offer: the claim word (0 or 1) the thread must win
   * before it starts the attempt. Absent: a plain request, run as it comes.
   */
  claimSlot?: ClaimSlot;
}

export interface ThreadResponse {
  requestId: number;
  output: ThreadOutput;
}

/** What a task thread receives as `workerData`: the task modules to import, and its shared words. */
export interface TaskThreadData {
  modules: { specifier: string; url: string }[];
  /** {@link SHARED_BYTES} of shared memory: see {@link SharedWords}. */
  shared: SharedArrayBuffer;
}

/** Size of a thread's shared words. */
export const SHARED_BYTES = 24;
const STOP_REQUEST = 0;
const STOP_REASON = 1;
const MEMORY_MB = 2;
const MEMORY_SAMPLES = 3;
const CLAIMS = 4;
const REASON_CODES: { readonly [R in AbortReason]: number } = { cancel: 1, deadline: 2 };

/**
 * Six int32 words one task thread shares with the main thread, read and
 * written with Atomics:
 *
 *   0  stop request  request id (as int32) of the attempt to stop (main writes)
 *   1  stop reason   why (main writes)
 *   2  memory        the thread's heap + external memory at its last sample, in MiB (thread writes)
 *   3  samples       how many samples it has taken, wrapping (thread writes)
 *   4, 5  claims     the open offer of each claim slot: its request id as a
 *                   nonzero int32, or 0 once claimed or withdrawn (main
 *                   writes an offer; either side swaps it to 0, and only
 *                   the one whose swap found the id may act on it)
 *
 * A stale stop request (an earlier attempt's id) never matches the running one.
 */
export class SharedWords {
  readonly #words: Int32Array;

  constructor(buffer: SharedArrayBuffer) {
    this.#words = new Int32Array(buffer, 0, SHARED_BYTES / 4);
  }

  /** Main thread: asks the attempt `requestId` to stop. */
  raiseStop(requestId: number, reason: AbortReason): void {
    Atomics.store(this.#words, STOP_REASON, REASON_CODES[reason]);
    // The id last: a thread that sees it sees the reason too.
    Atomics.store(this.#words, STOP_REQUEST, requestId | 0);
  }

  /** Task thread: why `requestId` was asked to stop, or null if it was not. */
  stopRaised(requestId: number): AbortReason | null {
    if (Atomics.load(this.#words, STOP_REQUEST) !== (requestId | 0)) return null;
    return Atomics.load(this.#words, STOP_REASON) === REASON_CODES.deadline ? 'deadline' : 'cancel';
  }

  /** Main thread: opens an offer of `requestId` in `slot` (the slot's last offer has been settled). */
  offer(slot: ClaimSlot, requestId: number): void {
    Atomics.store(this.#words, CLAIMS + slot, claimWord(requestId));
  }

  /**
   * Either side: takes the offer of `requestId` in `slot`. True for the one
   * caller that found it still open (the thread may start it, or the main
   * thread has withdrawn it); false once the other side has taken it.
   */
  take(slot: ClaimSlot, requestId: number): boolean {
    const word = claimWord(requestId);
    return Atomics.compareExchange(this.#words, CLAIMS + slot, word, 0) === word;
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
}

/** A request id as a claim word: never 0 (0 means no open offer), whatever the id. */
function claimWord(requestId: number): number {
  return (requestId % 0x7fffffff) + 1;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const isNullableNumber = (value: unknown): boolean => value === null || typeof value === 'number';

function isThreadInput(value: unknown): value is ThreadInput {
  if (!isRecord(value)) return false;
  switch (value.type) {
    case 'RUN_TASK':
      return (
        typeof value.taskType === 'string' &&
        isRecord(value.payload) &&
        typeof value.jobId === 'string' &&
        typeof value.attemptId === 'string' &&
        typeof value.attemptNumber === 'number' &&
        isNullableNumber(value.maxAttempts) &&
        isNullableNumber(value.deadlineAtMs) &&
        (value.parents === undefined || value.parents === null || Array.isArray(value.parents)) &&
        (value.traceContext === undefined ||
          value.traceContext === null ||
          (isRecord(value.traceContext) && typeof value.traceContext.traceparent === 'string')) &&
        (value.steps === undefined || value.steps === null || Array.isArray(value.steps)) &&
        (value.stepCount === undefined || isNullableNumber(value.stepCount))
      );
    case 'ABORT_TASK':
      return ABORT_REASONS.includes(value.reason as AbortReason);
    case 'CALL_SETTLED':
      return typeof value.callId === 'number' && isCallOutcome(value.outcome);
    default:
      return false;
  }
}

function isCallOutcome(value: unknown): value is CallOutcome {
  if (!isRecord(value)) return false;
  if (value.ok === true) return isRecord(value.reply);
  return value.ok === false && typeof value.code === 'string' && typeof value.message === 'string';
}

function isThreadOutput(value: unknown): value is ThreadOutput {
  if (!isRecord(value)) return false;
  switch (value.type) {
    case 'TASK_STARTED':
      return true;
    case 'TASK_LOG':
      return (
        LOG_LEVELS.includes(value.level as TaskLogLevel) &&
        typeof value.message === 'string' &&
        isRecord(value.fields)
      );
    case 'TASK_PROGRESS':
      return (
        typeof value.fraction === 'number' &&
        (value.message === null || typeof value.message === 'string')
      );
    case 'TASK_CALL':
      return (
        typeof value.callId === 'number' &&
        isRecord(value.call) &&
        typeof value.call.type === 'string'
      );
    case 'TASK_SUCCEEDED':
      return (
        typeof value.result === 'string' &&
        (value.resultFormat === 'text' || value.resultFormat === 'json')
      );
    case 'TASK_FAILED':
      return typeof value.error === 'string' && typeof value.retryable === 'boolean';
    case 'TASK_SUSPENDED':
      return typeof value.sleepMillis === 'number' || typeof value.waitForJobId === 'string';
    default:
      return false;
  }
}

/** Checks a structured-clone value that arrived on the thread side. */
export function isThreadRequest(value: unknown): value is ThreadRequest {
  return (
    isRecord(value) &&
    typeof value.requestId === 'number' &&
    isThreadInput(value.input) &&
    (value.claimSlot === undefined || value.claimSlot === 0 || value.claimSlot === 1)
  );
}

/** Checks a structured-clone value that arrived on the main side. */
export function isThreadResponse(value: unknown): value is ThreadResponse {
  return isRecord(value) && typeof value.requestId === 'number' && isThreadOutput(value.output);
}

/** Checks the `workerData` a task thread was started with. */
export function isTaskThreadData(value: unknown): value is TaskThreadData {
  return (
    isRecord(value) &&
    value.shared instanceof SharedArrayBuffer &&
    value.shared.byteLength >= SHARED_BYTES &&
    Array.isArray(value.modules) &&
    value.modules.every(
      (m: unknown) => isRecord(m) && typeof m.specifier === 'string' && typeof m.url === 'string',
    )
  );
}
