/**
 * ENQUEUE_CHILD: a running attempt's handler submits a child job.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import type { EnqueueChild } from '../../protocol/messages.js';
import type { CoreState } from './state.js';
import { refuseCall, type FencedCall } from './calls.js';

export function enqueueChild(s: CoreState, call: FencedCall<EnqueueChild>): void {
  const { session, msg } = call;
  refuseCall(
    s,
    session,
    msg.requestId,
    ErrorCode.UnsupportedRequest,
    'ENQUEUE_CHILD is not offered',
  );
}
