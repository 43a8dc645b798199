/** The public surface of the dtp client library. */
export { DtpClient, DEFAULT_CONNECT_TIMEOUT_MS, WAIT_SLICE_MS } from './client.js';
export type {
  CancelResult,
  ConnectOptions,
  JobPage,
  JobWithAttempts,
  ListJobsOptions,
  SubmitOptions,
  SubmitRequest,
  SubmitResult,
} from './client.js';
export {
  ClientClosedError,
  RemoteError,
  SubmitRejectedError,
  TransportError,
  UnexpectedReplyError,
  WaitTimeoutError,
  remoteErrorCode,
} from './errors.js';
export type { TransportErrorCode } from './errors.js';
export {
  DEFAULT_SUBMIT_RETRY_BASE_DELAY_MS,
  DEFAULT_SUBMIT_RETRY_MAX_DELAY_MS,
  backoffCeilingMs,
  fullJitterDelayMs,
  isRetryableSubmitError,
  submitWithRetry,
} from './submit-retry.js';
export type { RetryEvent, SubmitRetryOptions, SubmitRetryPolicy } from './submit-retry.js';
export type {
  AttemptOutcome,
  AttemptSnapshot,
  JobSnapshot,
  JobState,
  Priority,
  TerminalState,
  WorkerSnapshot,
} from '../protocol/messages.js';
export { formatDurationMs, parseDuration } from './duration.js';
