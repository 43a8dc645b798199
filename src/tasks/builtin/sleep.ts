/**
 * `SLEEP {"durationMillis": n}`, n in 0..600000: waits n ms, then resolves
 * `slept <n> ms`. Cancellation aborts the wait at once.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { JsonObject } from '../../protocol/messages.js';
import { BUILTIN_TASKS } from '../../protocol/task-types.js';
import { TaskFailedError, type TaskContext, type TaskDefinition } from '../registry.js';
import { requireIntegerField } from '../validation.js';

const FIELD = BUILTIN_TASKS.SLEEP.field;

function readDurationMs(payload: JsonObject): number {
  return requireIntegerField(payload, FIELD.name, FIELD);
}

async function runSleep(payload: JsonObject, context: TaskContext): Promise<string> {
  const durationMs = readDurationMs(payload);
  try {
    await delay(durationMs, undefined, { signal: context.signal });
  } catch (err) {
    // The timer rejects with a generic AbortError; report a cancellation in
    // the same shape as every other task failure, keeping the reason as cause.
    if (context.signal.aborted) {
      throw new TaskFailedError('cancelled', { cause: context.signal.reason });
    }
    throw err;
  }
  return `slept ${durationMs} ms`;
}

export const sleepTask: TaskDefinition = {
  taskType: 'SLEEP',
  validate(payload) {
    readDurationMs(payload);
  },
  run: runSleep,
};
