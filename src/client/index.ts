// The declarations speak Node.js's own types (AbortSignal, Buffer, TLS
// options); the package depends on @types/node, and this directive, kept in
// the emitted .d.ts, brings it in for users whatever their `types` setting.
/// <reference types="node" preserve="true" />
/**
 * The public surface of the dtp client library (package entry `dtp/client`).
 * It loads no coordinator or worker code and no native module.
 */
export {
  DtpClient,
  checkSubmitSize,
  connect,
  DEFAULT_CONNECT_TIMEOUT_MS,
  FIRST_POLL_INTERVAL_MS,
  WAIT_POLL_INTERVAL_MS,
  WAIT_SLICE_MS,
} from './client.js';
export type {
  BatchJob,
  BatchSubmission,
  ConnectOptions,
  DedupOptions,
  FlowJobSpec,
  FlowSubmission,
  EventFilter,
  EventStreamOptions,
  WatchEvent,
  JobOptions,
  JobWithAttempts,
  ListJobsOptions,
  SubmitOptions,
  SubmitRequest,
  SubmitResult,
  WorkerList,
} from './client.js';
export { JobHandle, settledValue } from './job-handle.js';
export type { CancelResult, JobClient, SubmitOutcome, WaitOptions } from './job-handle.js';
export type { JobPage, ListQuery } from './list-paging.js';
export { QueuesApi } from './queues.js';
export type {
  ChangedQueue,
  QueueInfo,
  QueueLimits,
  QueueStateOptions,
  RateLimit,
} from './queues.js';
export type { RerunOptions, RerunResult } from './rerun.js';
export {
  DEFAULT_FEATURE_CACHE,
  EXTENDED_FEATURES,
  FeatureCache,
  V1_FEATURES,
} from './negotiation.js';
export type { CoordinatorFeatures, ShardKnowledge } from './negotiation.js';
export type { ShardTable } from './shard-table.js';
export type {
  AnyTasks,
  BuiltinPayloads,
  FlowJobOf,
  TaskName,
  TaskPayload,
  TaskResult,
} from './typing.js';
export type { EventGap } from './subscription.js';
export {
  EventsUnsupportedError,
  ClientClosedError,
  FeatureUnsupportedError,
  InvalidPayloadError,
  JobCancelledError,
  JobFailedError,
  RemoteError,
  RequestTooLargeError,
  SubmitRejectedError,
  TransportError,
  UnexpectedReplyError,
  UnsupportedFeatureError,
  UnsupportedRequestError,
  WaitTimeoutError,
  WrongPortError,
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
export type { PayloadIssue } from '../sdk/payload-schema.js';
export type {
  AttemptOutcome,
  AttemptSnapshot,
  DedupMode,
  JobSnapshot,
  JobState,
  JsonObject,
  JsonValue,
  Priority,
  TerminalState,
  WorkerSnapshot,
} from '../protocol/messages.js';
export { formatDurationMs, parseDuration } from '../protocol/duration.js';
export { Schedules } from './schedules.js';
export type { ScheduleOptions, ScheduleWithJobs } from './schedules.js';
export { TriggersApi } from './signals.js';
export type {
  PublishOptions,
  PublishResult,
  SignalResult,
  TriggerOptions,
  TriggerSnapshot,
} from './signals.js';
