/**
 * A coordinator listens on two framed ports of different kinds: workers
 * register on the worker port, clients send requests to the client port.
 * Dialling the wrong one is a configuration error that no retry fixes, so
 * workers and clients recognise the other kind's answer to their first frame
 * and stop with a message that names the right port:
 *
 * - a client port (ours or the reference) answers `WORKER_REGISTER` with an
 *   `ERROR` containing `Unsupported request` (ours: code UNSUPPORTED_REQUEST),
 *   or, with client tokens, with UNAUTHENTICATED naming the frame it got;
 * - a worker port answers any client request with an `ERROR` saying the first
 *   message must be `WORKER_REGISTER` (ours: code NOT_REGISTERED).
 *
 * The reference coordinator sends no codes, so its answers are recognised by
 * the words the protocol guarantees; ours by their codes.
 */
import { ErrorCode, LocalErrorCode } from '../protocol/error-codes.js';
import { isNotUnderstood } from '../protocol/features.js';
import type { ErrorMessage } from '../protocol/messages.js';

/** The coordinator's default worker port. */
export const DEFAULT_WORKER_PORT = 7070;
/** The coordinator's default client port. */
export const DEFAULT_CLIENT_PORT = 7071;

/** Said by a worker port to a client request (after the protocol's own words). */
export const WORKER_PORT_HINT = 'this is the worker port; clients connect to the client port';
/** Said by a client port to a worker's message. */
export const CLIENT_PORT_HINT = 'this is the client port; workers connect to the worker port';

/** The code of the local error a worker or client stops with. */
export const WRONG_PORT_CODE = LocalErrorCode.WrongPort;

/** What a worker that dialled `port` is told when it turns out to be a client port. */
export function workerOnClientPortMessage(port: number): string {
  return (
    `port ${port} is a coordinator's client port; ` +
    `workers connect to its worker port (default ${DEFAULT_WORKER_PORT})`
  );
}

/** What a client that dialled `port` is told when it turns out to be a worker port. */
export function clientOnWorkerPortMessage(port: number): string {
  return (
    `port ${port} is a coordinator's worker port; ` +
    `clients connect to its client port (default ${DEFAULT_CLIENT_PORT})`
  );
}

type ErrorReply = Pick<ErrorMessage, 'code' | 'message'>;

const hasNoCode = (reply: ErrorReply): boolean => reply.code === null || reply.code === '';

/** The text our client port uses when a non-AUTH first frame meets client tokens. */
export function notAuthFirstReason(type: string): string {
  return `first frame was ${type}, not AUTH`;
}

/** True when `reply` (to a WORKER_REGISTER) came from a client port. */
export function isClientPortAnswer(reply: ErrorReply): boolean {
  if (reply.code === ErrorCode.UnsupportedRequest) return true;
  if (reply.code === ErrorCode.Unauthenticated) {
    return reply.message.includes(notAuthFirstReason('WORKER_REGISTER'));
  }
  return hasNoCode(reply) && reply.message.includes('Unsupported request');
}

/** True when `reply` (the first to a client request) came from a worker port. */
export function isWorkerPortAnswer(reply: ErrorReply): boolean {
  if (reply.code === ErrorCode.NotRegistered) return true;
  // A client port's answers may name WORKER_REGISTER too: the reference lists
  // every type it knows when it cannot decode a frame.
  return (
    hasNoCode(reply) &&
    reply.message.includes('WORKER_REGISTER') &&
    !isNotUnderstood(reply) &&
    !reply.message.includes('Unknown job')
  );
}
