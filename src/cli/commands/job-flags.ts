/**
 * The job's options as `submit` takes them from flags: each checked here,
 * before anything is sent (a UsageError naming the flag: exit 2), and turned
 * into the fields of a submission (src/client/requests.ts maps those to the
 * wire).
 */
import type { SubmitRequest } from '../../client/client.js';
import {
  MAX_DEDUP_KEY_LENGTH,
  MAX_DEDUP_WINDOW_MS,
  MAX_DELAY_MS,
  MAX_PARENTS,
} from '../../protocol/limits.js';
import { DEDUP_MODES, PARENT_FAILURE_POLICIES, PRIORITIES } from '../../protocol/messages.js';
import type { JsonObject } from '../../protocol/messages.js';
import { UsageError, splitList, type FlagSpec, type FlagValues } from '../flags.js';
import { groupFlag, queueFlag, timeMs, waveDurationMs } from './shared.js';

/** Deduplication and expiry: flags of `submit` after `--run-at`. */
export const DEDUP_FLAGS: readonly FlagSpec[] = [
  {
    name: 'dedup-key',
    type: 'string',
    placeholder: 'key',
    help: `deduplication key, 1..${MAX_DEDUP_KEY_LENGTH} characters, per queue: see --dedup-mode`,
  },
  {
    name: 'dedup-mode',
    type: 'enum',
    values: DEDUP_MODES,
    defaultLabel: 'active',
    help:
      "with --dedup-key: active = nothing new while the key's job is not terminal; " +
      "throttle = nothing new within --dedup-window of its creation; debounce = while the key's " +
      'job has not started, replace its payload and run time (needs --delay or --run-at)',
  },
  {
    name: 'dedup-window',
    type: 'string',
    placeholder: 'duration',
    help: "throttle's window: 500ms, 30s, 5m, 2h, 1d (1ms..366d; required with throttle only)",
  },
  {
    name: 'expire-at',
    type: 'string',
    placeholder: 'time',
    help: 'if not started by this time, never start (CANCELLED, expired): ISO 8601 with an offset, or epoch ms',
  },
  {
    name: 'expire-after',
    type: 'string',
    placeholder: 'duration',
    help: 'as --expire-at, this long from now: 30s, 5m, 2h, 1d (not with --expire-at)',
  },
];

/** Every option of the job, from the flags of `submit`. */
export function requestOfFlags(
  values: FlagValues,
  taskType: string,
  payload: JsonObject,
  nowMs = Date.now(),
): SubmitRequest {
  const key = values.optionalString('idempotency-key');
  if (key !== undefined && key.trim() === '') {
    throw new UsageError('--idempotency-key must not be empty');
  }
  const request: SubmitRequest = {
    taskType,
    payload,
    maxAttempts: values.optionalInt('max-attempts') ?? null,
    idempotencyKey: key ?? null,
    priority: values.optionalEnum('priority', PRIORITIES) ?? null,
    timeoutMillis: values.optionalInt('task-timeout-millis') ?? null,
    ...parentsOf(values),
  };
  const queue = queueFlag(values, 'queue');
  const groupKey = groupFlag(values);
  if (queue !== undefined) request.queue = queue;
  if (groupKey !== undefined) request.groupKey = groupKey;
  const runAtMillis = runAtFlag(values, nowMs);
  if (runAtMillis !== null) request.runAtMillis = runAtMillis;
  return { ...request, ...dedupOf(values, runAtMillis), ...expiryOf(values, nowMs) };
}

/** `--depends-on` and `--on-parent-failure`. */
function parentsOf(values: FlagValues): Pick<SubmitRequest, 'dependsOn' | 'onParentFailure'> {
  const given = values.optionalString('depends-on');
  const policy = values.optionalEnum('on-parent-failure', PARENT_FAILURE_POLICIES) ?? null;
  if (given === undefined) {
    if (policy !== null) throw new UsageError('--on-parent-failure needs --depends-on');
    return {};
  }
  const dependsOn = splitList(given);
  if (dependsOn.length === 0) throw new UsageError('--depends-on must name at least one job id');
  if (new Set(dependsOn).size > MAX_PARENTS) {
    throw new UsageError(`--depends-on names ${dependsOn.length} jobs; at most ${MAX_PARENTS}`);
  }
  return { dependsOn, onParentFailure: policy };
}

/** `--delay`/`--run-at` as a due time (epoch ms), or null. */
function runAtFlag(values: FlagValues, nowMs: number): number | null {
  const delay = values.optionalString('delay');
  const runAt = values.optionalString('run-at');
  if (delay !== undefined && runAt !== undefined) {
    throw new UsageError('--delay and --run-at cannot be used together');
  }
  if (delay !== undefined) {
    const ms = waveDurationMs(delay, '--delay');
    if (ms > MAX_DELAY_MS) throw new UsageError('--delay must be at most 366d');
    return nowMs + ms;
  }
  if (runAt === undefined) return null;
  const atMs = timeMs(runAt, '--run-at');
  if (atMs > nowMs + MAX_DELAY_MS) throw new UsageError('--run-at must be at most 366 days ahead');
  return atMs;
}

type DedupFields = Pick<SubmitRequest, 'dedupKey' | 'dedupMode' | 'dedupWindowMillis'>;

/** `--dedup-key`, `--dedup-mode` and `--dedup-window`, which go together only so. */
function dedupOf(values: FlagValues, runAtMillis: number | null): DedupFields {
  const key = values.optionalString('dedup-key');
  const mode = values.optionalEnum('dedup-mode', DEDUP_MODES);
  const window = values.optionalString('dedup-window');
  if (key === undefined) {
    if (mode !== undefined) throw new UsageError('--dedup-mode needs --dedup-key');
    if (window !== undefined) throw new UsageError('--dedup-window needs --dedup-key');
    return {};
  }
  if (key.length < 1 || key.length > MAX_DEDUP_KEY_LENGTH) {
    throw new UsageError(
      `--dedup-key must be 1..${MAX_DEDUP_KEY_LENGTH} characters, got ${key.length}`,
    );
  }
  const fields: DedupFields = { dedupKey: key };
  if (mode !== undefined) fields.dedupMode = mode;
  if (mode === 'throttle') {
    if (window === undefined) throw new UsageError('--dedup-mode throttle needs --dedup-window');
    const ms = waveDurationMs(window, '--dedup-window');
    if (ms < 1 || ms > MAX_DEDUP_WINDOW_MS) {
      throw new UsageError('--dedup-window must be 1ms..366d');
    }
    fields.dedupWindowMillis = ms;
  } else if (window !== undefined) {
    throw new UsageError('--dedup-window goes only with --dedup-mode throttle');
  }
  if (mode === 'debounce' && runAtMillis === null) {
    throw new UsageError('--dedup-mode debounce needs a delay: --delay (or --run-at)');
  }
  return fields;
}

/** `--expire-at` or `--expire-after` as an epoch ms in the future. */
function expiryOf(values: FlagValues, nowMs: number): Pick<SubmitRequest, 'expiresAtMillis'> {
  const at = values.optionalString('expire-at');
  const after = values.optionalString('expire-after');
  if (at !== undefined && after !== undefined) {
    throw new UsageError('--expire-at and --expire-after cannot be used together');
  }
  if (at !== undefined) {
    const atMs = timeMs(at, '--expire-at');
    if (atMs <= nowMs) throw new UsageError('--expire-at is in the past');
    return { expiresAtMillis: atMs };
  }
  if (after === undefined) return {};
  const ms = waveDurationMs(after, '--expire-after');
  if (ms < 1) throw new UsageError('--expire-after must be at least 1ms');
  return { expiresAtMillis: nowMs + ms };
}
