/** Schedule definitions for tests: every field at its default unless given. */
import type { ScheduleDefinition } from '../../src/protocol/messages.js';

export function scheduleDefinition(
  name: string,
  taskType: string,
  extra: Partial<ScheduleDefinition>,
): ScheduleDefinition {
  return {
    name,
    taskType,
    cron: null,
    everyMillis: null,
    timezone: null,
    payload: {},
    maxAttempts: null,
    priority: null,
    timeoutMillis: null,
    overlap: null,
    catchUp: null,
    paused: null,
    ...extra,
  };
}
