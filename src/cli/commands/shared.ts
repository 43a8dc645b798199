/**
 * Helpers several client commands share: the job-id argument, the flags of
 * queues, times and JSON values, and how a snapshot or an event is shown.
 */
import type { WatchEvent } from '../../client/client.js';
import type { EventGap } from '../../client/subscription.js';
import type { RetryEvent } from '../../client/submit-retry.js';
import { parseDuration } from '../../protocol/duration.js';
import { payloadBytesOf } from '../../client/signals.js';
import { MAX_SIGNAL_PAYLOAD_BYTES } from '../../protocol/limits.js';
import type { JobSnapshot, JsonValue } from '../../protocol/messages.js';
import { DEFAULT_QUEUE, groupKeyProblem, queueNameProblem } from '../../protocol/queue-names.js';
import { UsageError, type FlagSpec, type FlagValues } from '../flags.js';
import { EXIT_CODES, attemptText, type ExitCode } from '../output.js';
import type { ArgSpec, CommandContext } from './command.js';

export function jobId(ctx: CommandContext): string {
  const id = ctx.args[0];
  if (id === undefined || id === '') throw new UsageError('missing <job-id>');
  return id;
}

export const JOB_ID_ARG: readonly ArgSpec[] = [{ name: 'job-id', help: 'the id submit printed' }];

/**
 * A snapshot as `--json` shows it: `queue` always (a coordinator leaves out
 * `default`), `groupKey` null when the job has none.
 */
export function withQueueFields(job: JobSnapshot): JobSnapshot {
  return { ...job, queue: job.queue ?? DEFAULT_QUEUE, groupKey: job.groupKey ?? null };
}

export function queueFlag(values: FlagValues, flag: string): string | undefined {
  const name = values.optionalString(flag);
  const problem = name === undefined ? null : queueNameProblem(name);
  if (problem !== null) throw new UsageError(`--${flag}: queue name ${problem}`);
  return name;
}

export function groupFlag(values: FlagValues): string | undefined {
  const key = values.optionalString('group');
  const problem = key === undefined ? null : groupKeyProblem(key);
  if (problem !== null) throw new UsageError(`--group: group key ${problem}`);
  return key;
}

/** A duration of this wave's flags: `<n>ms|s|m|h|d`, or a bare integer (ms). */
export function waveDurationMs(text: string, flag: string): number {
  const trimmed = text.trim();
  if (/^[0-9]{1,15}$/.test(trimmed)) return Number(trimmed);
  const parsed = parseDuration(trimmed);
  if ('error' in parsed) throw new UsageError(`${flag}: ${parsed.error}`);
  return parsed.ms;
}

/** A time: ISO 8601 with an offset (`…Z`, `…+01:00`) or epoch milliseconds. */
export function timeMs(text: string, flag: string): number {
  const trimmed = text.trim();
  if (/^[0-9]{1,15}$/.test(trimmed)) return Number(trimmed);
  const iso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/i;
  const ms = iso.test(trimmed) ? Date.parse(trimmed) : Number.NaN;
  if (!Number.isFinite(ms)) {
    throw new UsageError(
      `${flag}: expected ISO 8601 with an offset (2026-12-24T18:00:00+01:00) or epoch ms, got ${JSON.stringify(trimmed.slice(0, 40))}`,
    );
  }
  return ms;
}

export function describeRetry(event: RetryEvent): string {
  return `Submission failed (${event.error.message}); retry ${event.retry} in ${event.delayMs} ms\n`;
}

/** Exit 4 under `--exit-status` when the job ended FAILED or CANCELLED. */
export function waitExitCode(job: JobSnapshot, exitStatus: boolean): ExitCode {
  if (!exitStatus) return EXIT_CODES.ok;
  return job.state === 'FAILED' || job.state === 'CANCELLED' ? EXIT_CODES.jobFailed : EXIT_CODES.ok;
}

/** One line of `watch` / `events` for a person. */
export function eventLine(item: WatchEvent): string {
  const job = item.job;
  const at = new Date(item.atMillis).toISOString();
  const progress =
    job.progress == null
      ? ''
      : ` ${Math.round(job.progress.fraction * 100)}%${job.progress.message === null ? '' : ` ${job.progress.message}`}`;
  return `${at} ${item.event} ${job.jobId} ${job.taskType} ${job.state} attempt ${attemptText(job)}${progress}\n`;
}

/** What a gap in the events means for the reader, on stderr. */
export function gapNote(gap: EventGap): string {
  return gap.reason === 'missed'
    ? `Warning: ${gap.missed ?? 'some'} events were missed (this reader fell behind)\n`
    : 'Warning: reconnected to the coordinator; changes made while disconnected were not seen\n';
}

/** The JSON line of a watch or events item: exactly the contract's three fields. */
export function eventDoc(item: WatchEvent): unknown {
  return { event: item.event, atMillis: item.atMillis, job: item.job };
}

/** `--payload` / `--payload-file` of a signal or an event: any JSON value. */
export const JSON_VALUE_FLAGS: readonly FlagSpec[] = [
  {
    name: 'payload',
    type: 'string',
    placeholder: 'json',
    defaultLabel: 'null',
    help: 'the payload, any JSON value (at most 256 KiB)',
  },
  {
    name: 'payload-file',
    type: 'string',
    placeholder: 'file',
    help: 'read the payload from a file; - = standard input',
  },
];

/**
 * The JSON value of `--payload` / `--payload-file` (null when neither is
 * given), checked against the 256 KiB limit: a usage error before connecting.
 */
export async function jsonValueOf(ctx: CommandContext): Promise<JsonValue> {
  const inline = ctx.values.optionalString('payload');
  const file = ctx.values.optionalString('payload-file');
  if (inline !== undefined && file !== undefined) {
    throw new UsageError('give --payload or --payload-file, not both');
  }
  if (inline === undefined && file === undefined) return null;
  let source = '--payload';
  let text = inline ?? '';
  if (file !== undefined) {
    source = `--payload-file ${file === '-' ? '(standard input)' : file}`;
    try {
      text = await ctx.readInput(file);
    } catch (err) {
      throw new UsageError(`cannot read ${source}: ${(err as Error).message}`);
    }
  }
  let value: JsonValue;
  try {
    value = JSON.parse(text) as JsonValue;
  } catch (err) {
    throw new UsageError(`${source} is not valid JSON: ${(err as Error).message}`);
  }
  const size = payloadBytesOf(value);
  if ('bytes' in size && size.bytes > MAX_SIGNAL_PAYLOAD_BYTES) {
    throw new UsageError(
      `${source} is ${size.bytes.toLocaleString('en-US')} bytes of JSON; the limit is 256 KiB`,
    );
  }
  return value;
}
