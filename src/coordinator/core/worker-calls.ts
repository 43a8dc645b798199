/**
 * Calls from running attempts (the worker-port call mechanism): ENQUEUE_CHILD
 * (children.ts), RECORD_STEP and GET_STEPS (steps.ts).
 *
 * A call is a worker message that carries `requestId` (a positive integer),
 * `jobId` and `attemptId` (messages.ts `WorkerCall`). Each is answered once,
 * on the worker's connection: with its reply (which carries the same
 * `requestId`) or with `ERROR {code, message, requestId}`, which fails that
 * call only (the session goes on). Like every effect of the core, the answer
 * leaves after the commit of the input that produced it, so a reply to a call
 * that changed state is sent only once that change is durable.
 *
 * Every call is fenced by the attempt's lease: unless `attemptId` is the
 * job's current lease and that lease is this worker's, the answer is
 * `STALE_ATTEMPT` and nothing changes. A `requestId` that is not a positive
 * integer cannot be answered and loses the worker (protocol violation).
 *
 * Each call type has one handler in {@link CALL_HANDLERS}; it runs only after
 * the fence, with the job under the current lease.
 */
import type { WorkerCall } from '../../protocol/messages.js';
import { fenceCall, type FencedCall } from './calls.js';
import { enqueueChild } from './children.js';
import { getSteps, recordStep } from './steps.js';
import type { CoreState } from './state.js';
import type { WorkerSession } from './worker-registry.js';

export { requestIdProblem } from './calls.js';

type CallHandlers = {
  readonly [T in WorkerCall['type']]: (
    s: CoreState,
    call: FencedCall<Extract<WorkerCall, { type: T }>>,
  ) => void;
};

const CALL_HANDLERS: CallHandlers = {
  ENQUEUE_CHILD: enqueueChild,
  RECORD_STEP: recordStep,
  GET_STEPS: getSteps,
};

/** One call of a registered session (its worker id already checked): fence, then its handler. */
export function handleWorkerCall(s: CoreState, session: WorkerSession, msg: WorkerCall): void {
  const job = fenceCall(s, session, msg);
  if (job === null) return;
  // The table gives each type its own handler; `msg.type` picks the one for this message.
  const handler = CALL_HANDLERS[msg.type] as (s: CoreState, call: FencedCall<WorkerCall>) => void;
  handler(s, { session, job, msg });
}
