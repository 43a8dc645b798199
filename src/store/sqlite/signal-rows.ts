/**
 * Rows of the SQLite tables of signals, events and triggers (schema 12) <->
 * the store's records. Written as arrays of column values, in the order of
 * the column lists here.
 */
import type { Database } from 'better-sqlite3';
import type { Priority } from '../../protocol/messages.js';
import type {
  EventRecord,
  RecoveredState,
  SignalRecord,
  TriggerRecord,
  WriteBatch,
} from '../store.js';
import { columnList, type SqlValue } from './rows.js';

/** The signal, event and trigger parts of a batch as the writer applies them, in this order. */
export interface SignalParts {
  /** Signal rows to insert or replace (absent = none). */
  signals?: SqlValue[][];
  /** Event rows to insert (an id already stored fails the commit; absent = none). */
  events?: SqlValue[][];
  /** Trigger rows to insert or replace (absent = none). */
  triggers?: SqlValue[][];
  /** Then the names of triggers to delete (absent = none). */
  deletedTriggers?: string[];
}

export const SIGNAL_COLUMNS = ['job_id', 'seq', 'name', 'payload', 'at_ms', 'consumed'] as const;

export interface SignalRow {
  job_id: string;
  seq: number;
  name: string;
  payload: string;
  at_ms: number;
  /** 0 or 1. */
  consumed: number;
}

export function signalValues(signal: Readonly<SignalRecord>): SqlValue[] {
  return [
    signal.jobId,
    signal.seq,
    signal.name,
    signal.payloadJson,
    signal.atMs,
    signal.consumed ? 1 : 0,
  ];
}

export function signalFromRow(row: SignalRow): SignalRecord {
  return {
    jobId: row.job_id,
    seq: row.seq,
    name: row.name,
    payloadJson: row.payload,
    atMs: row.at_ms,
    consumed: row.consumed !== 0,
  };
}

export const EVENT_COLUMNS = [
  'event_id',
  'name',
  'event_key',
  'payload',
  'at_ms',
  'job_ids',
  'resumed',
] as const;

export interface EventRow {
  event_id: string;
  name: string;
  event_key: string | null;
  payload: string;
  at_ms: number;
  /** A JSON array of job ids. */
  job_ids: string;
  resumed: number;
}

export function eventValues(event: Readonly<EventRecord>): SqlValue[] {
  return [
    event.eventId,
    event.name,
    event.key,
    event.payloadJson,
    event.atMs,
    JSON.stringify(event.jobIds),
    event.resumed,
  ];
}

export function eventFromRow(row: EventRow): EventRecord {
  return {
    eventId: row.event_id,
    name: row.name,
    key: row.event_key,
    payloadJson: row.payload,
    atMs: row.at_ms,
    jobIds: JSON.parse(row.job_ids) as string[],
    resumed: row.resumed,
  };
}

export const TRIGGER_COLUMNS = [
  'name',
  'event',
  'task_type',
  'queue',
  'priority',
  'max_attempts',
  'created_at_ms',
  'updated_at_ms',
] as const;

export interface TriggerRow {
  name: string;
  event: string;
  task_type: string;
  queue: string;
  priority: string | null;
  max_attempts: number | null;
  created_at_ms: number;
  updated_at_ms: number;
}

export function triggerValues(trigger: Readonly<TriggerRecord>): SqlValue[] {
  return [
    trigger.name,
    trigger.event,
    trigger.taskType,
    trigger.queue,
    trigger.priority,
    trigger.maxAttempts,
    trigger.createdAtMs,
    trigger.updatedAtMs,
  ];
}

export function triggerFromRow(row: TriggerRow): TriggerRecord {
  return {
    name: row.name,
    event: row.event,
    taskType: row.task_type,
    queue: row.queue,
    priority: row.priority as Priority | null,
    maxAttempts: row.max_attempts,
    createdAtMs: row.created_at_ms,
    updatedAtMs: row.updated_at_ms,
  };
}

/** The signal, event and trigger parts of a batch, as the writer takes them (absent = none). */
export function encodeSignalParts(batch: WriteBatch): SignalParts {
  const parts: SignalParts = {};
  if (batch.signals !== undefined && batch.signals.length > 0) {
    parts.signals = batch.signals.map(signalValues);
  }
  if (batch.events !== undefined && batch.events.length > 0) {
    parts.events = batch.events.map(eventValues);
  }
  if (batch.triggers !== undefined && batch.triggers.length > 0) {
    parts.triggers = batch.triggers.map(triggerValues);
  }
  if (batch.deletedTriggers !== undefined && batch.deletedTriggers.length > 0) {
    parts.deletedTriggers = [...batch.deletedTriggers];
  }
  return parts;
}

/**
 * What recovery brings of signals and triggers: the signals no wait took of
 * the jobs in `loaded` (driven from the partial index of those, which stays
 * small: a job holds few, and a wait takes them soon), and every trigger.
 */
export function recoverSignalParts(
  reader: Database,
  loaded: ReadonlySet<string>,
): Required<Pick<RecoveredState, 'activeSignals' | 'triggers'>> {
  const activeSignals = reader
    .prepare<[], SignalRow>(
      `SELECT ${columnList(SIGNAL_COLUMNS, 's.')} FROM job_signals s INDEXED BY job_signals_held
         CROSS JOIN jobs j
        WHERE s.consumed = 0 AND j.job_id = s.job_id
          AND j.state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED')
        ORDER BY s.job_id, s.seq`,
    )
    .all()
    .filter((row) => loaded.has(row.job_id))
    .map(signalFromRow);
  const triggers = reader
    .prepare<[], TriggerRow>(`SELECT ${columnList(TRIGGER_COLUMNS)} FROM triggers ORDER BY name`)
    .all()
    .map(triggerFromRow);
  return { activeSignals, triggers };
}
