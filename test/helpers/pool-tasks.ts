/** Fixtures for tests of the task pool: attempts to run, and reading their outcomes. */
import assert from 'node:assert/strict';
import type { JsonObject } from '../../src/protocol/messages.js';
import type { TaskOutcome, TaskRun } from '../../src/worker/task-pool.js';

let attempts = 0;

/** A first attempt of `taskType` with fresh job and attempt ids. */
export function attempt(
  taskType: string,
  payload: JsonObject = {},
  more: Partial<TaskRun> = {},
): TaskRun {
  attempts++;
  return {
    taskType,
    payload,
    jobId: `job-${attempts}`,
    attemptId: `attempt-${attempts}`,
    attemptNumber: 1,
    maxAttempts: null,
    deadlineAtMs: null,
    ...more,
  };
}

/** The error of an outcome that must be a failure. */
export async function errorOf(outcome: Promise<TaskOutcome>): Promise<string> {
  const ended = await outcome;
  assert.equal(ended.success, false, `expected a failure, got ${JSON.stringify(ended)}`);
  return ended.success ? '' : ended.error;
}
