/**
 * What a worker may declare when it registers (WORKER_REGISTER) and list
 * afterwards (HELD_ATTEMPTS): each check names the field at fault, for the
 * `INVALID_REGISTRATION` refusal or the protocol violation it becomes.
 * Pure data checks: no state.
 */
import {
  MAX_CAPACITY,
  MAX_HELD_ATTEMPTS,
  MAX_HELD_ATTEMPTS_PER_MESSAGE,
  MAX_HELD_ID_LENGTH,
  MAX_PREFETCH,
  MAX_PREFETCH_PER_SLOT,
  MAX_SLOTS,
  MAX_TASK_TYPES_PER_WORKER,
  MAX_WORKER_ID_LENGTH,
  maxPrefetch,
} from '../../protocol/limits.js';
import type { HeldAttempt, WorkerRegister } from '../../protocol/messages.js';
import { isValidQueueName, MAX_QUEUES_PER_WORKER } from '../../protocol/queue-names.js';
import { isValidTaskType } from '../../protocol/task-types.js';

/** Attempts the session runs at once: `slots` when the worker sent it (feature `slots`), else `capacity`. */
export function slotsOf(msg: Pick<WorkerRegister, 'capacity' | 'slots'>): number {
  return msg.slots ?? msg.capacity;
}

/** What is wrong with a registration, naming the field; null when nothing is. */
export function registrationProblem(msg: WorkerRegister): string | null {
  if (msg.workerId.trim().length === 0) return 'WORKER_REGISTER: workerId must not be blank';
  if (msg.workerId.length > MAX_WORKER_ID_LENGTH) {
    return `WORKER_REGISTER: workerId must be at most ${MAX_WORKER_ID_LENGTH} characters`;
  }
  const capacity = capacityProblem(msg);
  if (capacity !== null) return capacity;
  const prefetch = msg.prefetch ?? 0;
  const most = maxPrefetch(slotsOf(msg));
  if (prefetch < 0 || prefetch > most) {
    return `WORKER_REGISTER: prefetch must be 0..${most} (${MAX_PREFETCH_PER_SLOT} x capacity, at most ${MAX_PREFETCH}), got ${prefetch}`;
  }
  return (
    taskTypesProblem(msg.taskTypes) ??
    heldListProblem('WORKER_REGISTER', msg.heldAttempts ?? null, MAX_HELD_ATTEMPTS) ??
    queuesProblem(msg.queues ?? null)
  );
}

/**
 * `capacity` is 1..1024 as version 1 fixes it; a worker with more slots
 * sends 1024 and `slots`, 1025..10,000.
 */
function capacityProblem(msg: WorkerRegister): string | null {
  if (msg.capacity < 1 || msg.capacity > MAX_CAPACITY) {
    return `WORKER_REGISTER: capacity must be 1..${MAX_CAPACITY}, got ${msg.capacity}`;
  }
  const slots = msg.slots ?? null;
  if (slots === null) return null;
  if (slots <= MAX_CAPACITY || slots > MAX_SLOTS) {
    return `WORKER_REGISTER: slots must be ${MAX_CAPACITY + 1}..${MAX_SLOTS}, got ${slots}`;
  }
  if (msg.capacity !== MAX_CAPACITY) {
    return `WORKER_REGISTER: slots must come with capacity ${MAX_CAPACITY}, got capacity ${msg.capacity}`;
  }
  return null;
}

/** A declared list of queues must be non-empty, bounded, and of valid names. */
function queuesProblem(queues: readonly string[] | null): string | null {
  if (queues === null) return null;
  if (queues.length === 0 || queues.length > MAX_QUEUES_PER_WORKER) {
    return `WORKER_REGISTER: queues must list 1..${MAX_QUEUES_PER_WORKER} queue names, got ${queues.length}`;
  }
  const invalid = queues.find((name) => !isValidQueueName(name));
  if (invalid !== undefined) {
    return `WORKER_REGISTER: queues holds an invalid queue name ${JSON.stringify(invalid.slice(0, 80))}`;
  }
  return null;
}

/** A list of held attempts (of a registration or a HELD_ATTEMPTS) within its bound, ids not too long. */
export function heldListProblem(
  where: 'WORKER_REGISTER' | 'HELD_ATTEMPTS',
  held: readonly HeldAttempt[] | null,
  limit: number = MAX_HELD_ATTEMPTS_PER_MESSAGE,
): string | null {
  if (held === null) return null;
  if (held.length > limit) {
    return `${where}: heldAttempts may list at most ${limit} attempts, got ${held.length}`;
  }
  const long = held.find(
    (h) => h.jobId.length > MAX_HELD_ID_LENGTH || h.attemptId.length > MAX_HELD_ID_LENGTH,
  );
  return long === undefined
    ? null
    : `${where}: heldAttempts ids must be at most ${MAX_HELD_ID_LENGTH} characters`;
}

/** A declared list must hold at most the limit of valid task type names. */
function taskTypesProblem(taskTypes: readonly string[] | null): string | null {
  if (taskTypes === null) return null;
  if (taskTypes.length > MAX_TASK_TYPES_PER_WORKER) {
    return `WORKER_REGISTER: taskTypes may list at most ${MAX_TASK_TYPES_PER_WORKER} task types, got ${taskTypes.length}`;
  }
  const invalid = taskTypes.find((name) => !isValidTaskType(name));
  if (invalid !== undefined) {
    return `WORKER_REGISTER: taskTypes holds an invalid task type name ${JSON.stringify(invalid.slice(0, 80))}`;
  }
  return null;
}
