/**
 * `FAIL {"failUntilAttempt": n}`, n in 0..1000: fails on purpose while the
 * attempt number is below n, then succeeds. Used to exercise retries.
 */
import type { JsonObject } from '../../protocol/messages.js';
import { BUILTIN_TASKS } from '../../protocol/task-types.js';
import { TaskFailedError, type TaskContext, type TaskDefinition } from '../registry.js';
import { requireIntegerField } from '../validation.js';

const FIELD = BUILTIN_TASKS.FAIL.field;

function readFailUntilAttempt(payload: JsonObject): number {
  return requireIntegerField(payload, FIELD.name, FIELD);
}

function decideOutcome(payload: JsonObject, context: TaskContext): string {
  const failUntilAttempt = readFailUntilAttempt(payload);
  const attempt = context.attemptNumber;
  if (attempt < failUntilAttempt) {
    throw new TaskFailedError(`deliberate failure on attempt ${attempt}`);
  }
  return `succeeded on attempt ${attempt}`;
}

function runFail(payload: JsonObject, context: TaskContext): Promise<string> {
  // The executor turns any throw (invalid payload, deliberate failure) into a rejection.
  return new Promise((resolve) => resolve(decideOutcome(payload, context)));
}

export const failTask: TaskDefinition = {
  taskType: 'FAIL',
  validate(payload) {
    readFailUntilAttempt(payload);
  },
  run: runFail,
};
