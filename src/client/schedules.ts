/**
 * `client.schedules`: recurring schedules, typed like `submit`. Each call is
 * one schedule request (SET/LIST/GET/PAUSE/RESUME/DELETE/TRIGGER_SCHEDULE);
 * a coordinator without schedules fails it with `UnsupportedFeatureError`
 * before anything is sent (client.ts probes once per address).
 */
import { KNOWN_STATES } from '../protocol/job-view.js';
import type {
  ClientReply,
  JobSnapshot,
  JsonObject,
  Priority,
  ScheduleCatchUp,
  ScheduleJob,
  ScheduleOverlap,
  ScheduleRequest,
  ScheduleSnapshot,
} from '../protocol/messages.js';
import { RemoteError, SubmitRejectedError, UnexpectedReplyError } from './errors.js';
import type { JobHandle } from './job-handle.js';

/** What {@link Schedules.set} defines: `cron` or `everyMs`, exactly one. */
export interface ScheduleOptions {
  /** 5 fields (minute first) or 6 (seconds first). */
  cron?: string;
  /** IANA time zone of `cron` (default UTC). */
  timezone?: string;
  /** A fixed interval, at least 1000 ms; the first tick one interval after the set. */
  everyMs?: number;
  payload?: JsonObject;
  maxAttempts?: number;
  priority?: Priority;
  timeoutMillis?: number;
  /** `allow` (default) or `skip`: no job while the previous one is not terminal. */
  overlap?: ScheduleOverlap;
  /** `latest` (default: one job for the latest tick missed during an outage) or `none`. */
  catchUp?: ScheduleCatchUp;
  paused?: boolean;
  /** The named queue its jobs go to (default `default`). */
  queue?: string;
}

/** A schedule with its recent jobs, newest first ({@link Schedules.get}). */
export interface ScheduleWithJobs extends ScheduleSnapshot {
  recentJobs: ScheduleJob[];
}

type Send = (msg: ScheduleRequest) => Promise<ClientReply>;
type Handle = (
  jobId: string,
  job: JobSnapshot,
  servingWorkers: number | null,
  queuePaused: boolean,
) => JobHandle;
type Status = (jobId: string) => Promise<JobSnapshot>;

function expect<T extends ClientReply['type']>(
  request: ScheduleRequest['type'],
  reply: ClientReply,
  type: T,
): Extract<ClientReply, { type: T }> {
  if (reply.type === type) return reply as Extract<ClientReply, { type: T }>;
  if (reply.type === 'ERROR') throw new RemoteError(reply);
  throw new UnexpectedReplyError(request, reply.type);
}

export class Schedules {
  readonly #send: Send;
  readonly #handle: Handle;
  readonly #status: Status;

  constructor(send: Send, handle: Handle, status: Status) {
    this.#send = send;
    this.#handle = handle;
    this.#status = status;
  }

  /** Creates the schedule or replaces its definition (the same definition again changes nothing). */
  async set(name: string, taskType: string, options: ScheduleOptions): Promise<ScheduleSnapshot> {
    const reply = await this.#send({
      type: 'SET_SCHEDULE',
      schedule: {
        name,
        taskType,
        cron: options.cron ?? null,
        everyMillis: options.everyMs ?? null,
        timezone: options.cron === undefined ? null : (options.timezone ?? 'UTC'),
        payload: options.payload ?? {},
        maxAttempts: options.maxAttempts ?? null,
        priority: options.priority ?? null,
        timeoutMillis: options.timeoutMillis ?? null,
        overlap: options.overlap ?? null,
        catchUp: options.catchUp ?? null,
        paused: options.paused ?? null,
        ...(options.queue === undefined ? {} : { queue: options.queue }),
      },
    });
    return expect('SET_SCHEDULE', reply, 'SCHEDULE_INFO').schedule;
  }

  /** Every schedule, sorted by name. */
  async list(): Promise<ScheduleSnapshot[]> {
    const reply = await this.#send({ type: 'LIST_SCHEDULES' });
    return expect('LIST_SCHEDULES', reply, 'SCHEDULE_LIST').schedules;
  }

  /** One schedule and its recent jobs; `RemoteError` `UNKNOWN_SCHEDULE` when there is none. */
  async get(name: string): Promise<ScheduleWithJobs> {
    const reply = await this.#send({ type: 'GET_SCHEDULE', name, knownStates: [...KNOWN_STATES] });
    const info = expect('GET_SCHEDULE', reply, 'SCHEDULE_INFO');
    return { ...info.schedule, recentJobs: info.recentJobs ?? [] };
  }

  async pause(name: string): Promise<ScheduleSnapshot> {
    return expect(
      'PAUSE_SCHEDULE',
      await this.#send({ type: 'PAUSE_SCHEDULE', name }),
      'SCHEDULE_INFO',
    ).schedule;
  }

  async resume(name: string): Promise<ScheduleSnapshot> {
    const reply = await this.#send({ type: 'RESUME_SCHEDULE', name });
    return expect('RESUME_SCHEDULE', reply, 'SCHEDULE_INFO').schedule;
  }

  /** Deletes the schedule; the jobs it made stay. */
  async delete(name: string): Promise<void> {
    expect(
      'DELETE_SCHEDULE',
      await this.#send({ type: 'DELETE_SCHEDULE', name }),
      'SCHEDULE_DELETED',
    );
  }

  /** One job of the schedule now, outside its cadence (also while paused). */
  async trigger(name: string): Promise<JobHandle> {
    const reply = await this.#send({
      type: 'TRIGGER_SCHEDULE',
      name,
      knownStates: [...KNOWN_STATES],
    });
    if (reply.type === 'SUBMIT_REJECTED') throw new SubmitRejectedError(reply);
    const submitted = expect('TRIGGER_SCHEDULE', reply, 'JOB_SUBMITTED');
    const job = submitted.job ?? (await this.#status(submitted.jobId));
    return this.#handle(
      submitted.jobId,
      job,
      submitted.servingWorkers ?? null,
      submitted.queuePaused === true,
    );
  }
}
