/**
 * Type-level view of what a client may submit: payload and result types per
 * task name, inferred from a task module's default export.
 *
 *     import type tasks from './my-tasks.js';     // type only: no handler code loaded
 *     const client = await connect<typeof tasks>({ host, port });
 *     const job = await client.submit('checksum', { path: 'a.txt' }); // payload checked
 *     const { sha256 } = await job.result();                          // result typed
 *
 * The built-in task types are always there (their results are strings).
 * Without a type argument every name is allowed, with a JSON object payload
 * and a JSON result.
 */
import type { JsonObject, JsonValue } from '../protocol/messages.js';
import type { BuiltinTaskType } from '../protocol/task-types.js';
import type { PayloadOf, ResultOf, TaskContext } from '../sdk/task.js';

/** Payloads of the built-in task types. */
export interface BuiltinPayloads {
  SLEEP: { durationMillis: number };
  WORD_COUNT: { text: string };
  SHA256: { text: string };
  PRIME_COUNT: { limit: number };
  FAIL: { failUntilAttempt: number };
}

/** A client that knows no task module: any name, any JSON object, any JSON result. */
export interface AnyTasks {
  [name: string]: (payload: JsonObject, ctx: TaskContext) => JsonValue;
}

/** The names a client typed with `T` may submit. */
export type TaskName<T> = (keyof T & string) | BuiltinTaskType;

/** The payload of task `K`. */
export type TaskPayload<T, K extends string> = K extends keyof T
  ? PayloadOf<T[K]>
  : K extends BuiltinTaskType
    ? BuiltinPayloads[K]
    : never;

/** What `result()` resolves with for task `K`: the handler's value, unchanged. */
export type TaskResult<T, K extends string> = K extends keyof T
  ? ResultOf<T[K]>
  : K extends BuiltinTaskType
    ? string
    : never;

/**
 * One job of a flow submitted by a client typed with `T`: its payload is the
 * payload of its own `taskType` (a union over the task names, told apart by
 * `taskType`). Untyped (`T` = {@link AnyTasks}) it is any name with a JSON
 * object payload.
 */
export type FlowJobOf<T, Spec extends { taskType: string; payload: JsonObject }> = {
  [K in TaskName<T>]: Omit<Spec, 'taskType' | 'payload'> & {
    taskType: K;
    payload: TaskPayload<T, K>;
  };
}[TaskName<T>];
