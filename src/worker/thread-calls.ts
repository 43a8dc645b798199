/**
 * The task-thread side of the call mechanism: the calls one attempt's
 * handler has made to the coordinator (`ctx.enqueue`, and any later call)
 * and not had answered yet.
 *
 * A call posts TASK_CALL (a fresh `callId`, the message without its ids) to
 * the main thread and returns a promise; the main thread answers with
 * CALL_SETTLED, which resolves it with the coordinator's reply or rejects it
 * with a {@link DtpError} carrying the refusal's code. When the attempt
 * ends or is stopped (its signal fires), every call still open rejects with
 * `CALL_ABORTED`, and later calls reject at once. At most
 * {@link MAX_CALLS_PER_ATTEMPT} calls are open at a time; one beyond
 * rejects with `TOO_MANY_CALLS` and is not sent.
 */
import { LocalErrorCode, isErrorCode, remoteCode } from '../protocol/error-codes.js';
import { DtpError } from '../protocol/errors.js';
import { MAX_CALLS_PER_ATTEMPT } from '../protocol/limits.js';
import type { JsonObject } from '../protocol/messages.js';
import type { CallOutcome } from './thread-messages.js';

interface OpenCall {
  readonly resolve: (reply: JsonObject) => void;
  readonly reject: (err: DtpError) => void;
}

/** The error a refused call rejects with: the code as the coordinator (or the main thread) sent it. */
export function callError(code: string, message: string): DtpError {
  if (isErrorCode(code)) return new DtpError(code, message);
  const local: readonly string[] = Object.values(LocalErrorCode);
  if (local.includes(code)) return new DtpError(code as LocalErrorCode, message);
  return new DtpError(remoteCode(code) ?? LocalErrorCode.RemoteError, message);
}

export class AttemptCalls {
  readonly #post: (callId: number, call: JsonObject) => void;
  readonly #open = new Map<number, OpenCall>();
  #nextCallId = 1;
  /** Set once the attempt ended or was stopped: why calls fail from now on. */
  #closed: string | null = null;

  constructor(post: (callId: number, call: JsonObject) => void) {
    this.#post = post;
  }

  /** Calls open now. */
  get openCount(): number {
    return this.#open.size;
  }

  /** Sends one call; resolves with the reply message (`type`, `requestId` and its fields). */
  call(call: JsonObject): Promise<JsonObject> {
    if (this.#closed !== null) {
      return Promise.reject(new DtpError(LocalErrorCode.CallAborted, this.#closed));
    }
    if (this.#open.size >= MAX_CALLS_PER_ATTEMPT) {
      return Promise.reject(
        new DtpError(
          LocalErrorCode.TooManyCalls,
          `at most ${MAX_CALLS_PER_ATTEMPT} calls of one attempt may wait for an answer at once`,
        ),
      );
    }
    const callId = this.#nextCallId++;
    return new Promise<JsonObject>((resolve, reject) => {
      this.#open.set(callId, { resolve, reject });
      try {
        this.#post(callId, call);
      } catch (err) {
        this.#open.delete(callId);
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  /** The main thread answered a call; an unknown (already failed) call id is ignored. */
  settle(callId: number, outcome: CallOutcome): void {
    const open = this.#open.get(callId);
    if (open === undefined) return;
    this.#open.delete(callId);
    if (outcome.ok) open.resolve(outcome.reply);
    else open.reject(callError(outcome.code, outcome.message));
  }

  /** The attempt ended or was stopped: every open call, and every later one, fails with `reason`. */
  close(reason: string): void {
    this.#closed ??= reason;
    const open = [...this.#open.values()];
    this.#open.clear();
    for (const call of open) call.reject(new DtpError(LocalErrorCode.CallAborted, reason));
  }
}
