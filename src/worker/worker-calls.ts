/**
 * The main-thread side of the call mechanism: the calls of running attempts
 * sent to the coordinator and not answered yet, by `requestId`.
 *
 * A handler's call (TASK_CALL from its thread) gets a fresh `requestId`,
 * unique on the worker's connection (one counter for the worker's life), and
 * goes out with the attempt's `workerId`, `jobId` and `attemptId`. The
 * coordinator answers it once: a reply that carries the `requestId`
 * (CHILD_ENQUEUED, ...) or an `ERROR` that does. Either settles the call here
 * and is passed back to the thread as CALL_SETTLED. A call whose connection
 * ends before the answer fails with `CONNECTION_LOST` (whether it took
 * effect is unknown: a call made again under the same key finds out); a
 * call whose attempt was stopped or ended is forgotten (its thread has
 * failed it already). At most {@link MAX_CALLS_PER_ATTEMPT} calls per
 * attempt are open; the thread keeps to that bound, this is the backstop.
 */
import { LocalErrorCode } from '../protocol/error-codes.js';
import { MAX_CALLS_PER_ATTEMPT } from '../protocol/limits.js';
import type { CallOutcome } from './thread-messages.js';

/** Where an answer goes: the call's attempt, connection, and the thread's call. */
interface OpenCall {
  readonly connection: object;
  readonly attemptId: string;
  readonly answer: (outcome: CallOutcome) => void;
}

export class WorkerCalls {
  #nextRequestId = 1;
  readonly #open = new Map<number, OpenCall>();
  readonly #perAttempt = new Map<string, number>();

  /** Calls waiting for an answer. */
  get openCount(): number {
    return this.#open.size;
  }

  /** Calls of one attempt waiting for an answer. */
  openFor(attemptId: string): number {
    return this.#perAttempt.get(attemptId) ?? 0;
  }

  /**
   * Registers a call about to be sent on `connection`; returns its
   * `requestId`, or null (and answers it `TOO_MANY_CALLS`) when its attempt
   * has the most calls open already.
   */
  open(
    connection: object,
    attemptId: string,
    answer: (outcome: CallOutcome) => void,
  ): number | null {
    const open = this.openFor(attemptId);
    if (open >= MAX_CALLS_PER_ATTEMPT) {
      answer({
        ok: false,
        code: LocalErrorCode.TooManyCalls,
        message: `at most ${MAX_CALLS_PER_ATTEMPT} calls of one attempt may wait for an answer at once`,
      });
      return null;
    }
    const requestId = this.#nextRequestId++;
    this.#open.set(requestId, { connection, attemptId, answer });
    this.#perAttempt.set(attemptId, open + 1);
    return requestId;
  }

  /**
   * An answer arrived on `connection`: settles its call. False when no call
   * of that connection waits under `requestId` (forgotten, or never made).
   */
  settle(connection: object, requestId: number, outcome: CallOutcome): boolean {
    const call = this.#open.get(requestId);
    if (call === undefined || call.connection !== connection) return false;
    this.#remove(requestId, call);
    call.answer(outcome);
    return true;
  }

  /** The call could not be sent after all: fails it with `outcome` now. */
  fail(requestId: number, outcome: CallOutcome): void {
    const call = this.#open.get(requestId);
    if (call === undefined) return;
    this.#remove(requestId, call);
    call.answer(outcome);
  }

  /** `connection` ended: every call still waiting on it fails with CONNECTION_LOST. */
  connectionLost(connection: object, reason: string): void {
    for (const [requestId, call] of [...this.#open]) {
      if (call.connection !== connection) continue;
      this.#remove(requestId, call);
      call.answer({
        ok: false,
        code: LocalErrorCode.ConnectionLost,
        message: `the connection to the coordinator ended before it answered (${reason})`,
      });
    }
  }

  /** The attempt ended or was stopped: its calls are forgotten (their answers will be ignored). */
  forgetAttempt(attemptId: string): void {
    if (!this.#perAttempt.has(attemptId)) return;
    for (const [requestId, call] of [...this.#open]) {
      if (call.attemptId === attemptId) this.#remove(requestId, call);
    }
  }

  #remove(requestId: number, call: OpenCall): void {
    this.#open.delete(requestId);
    const left = (this.#perAttempt.get(call.attemptId) ?? 1) - 1;
    if (left > 0) this.#perAttempt.set(call.attemptId, left);
    else this.#perAttempt.delete(call.attemptId);
  }
}
