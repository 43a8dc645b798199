/**
 * Strict v1 peers for tests: a fake coordinator that behaves like the
 * reference implementation of protocol v1 on both ports, and small v1-style
 * client and worker drivers that send no extension at all (for driving the
 * real dtp coordinator).
 *
 * {@link StrictV1Coordinator} knows only the v1 message types and fields
 * (v1-wire.ts). On the client port an undecodable frame (an unknown type such
 * as WAIT_JOB, bad JSON, a field of the wrong kind) gets `ERROR "Malformed
 * request: Undecodable message: …"` and the connection is closed; a decodable
 * message that is not a request gets `ERROR "Unsupported request …"` and the
 * connection stays open. On the worker port anything but HEARTBEAT and
 * TASK_RESULT after registration (WORKER_DRAINING included) is a violation
 * that drops the worker. Unknown fields are ignored. It never sends
 * `features` or any other extension field; LIST_JOBS returns every job in
 * one JOB_LIST without `nextCursor`. Its semantics are real but minimal: jobs
 * queue (priority, then submission order), go to the registered worker with
 * the most free slots, results complete, retry or fail them, cancel sends
 * TASK_CANCEL, a worker silent for the heartbeat timeout is dropped, an
 * attempt past its deadline fails. Assumption: a SUBMIT_JOB naming a task
 * type other than the five built-ins is undecodable (the reference reads
 * `taskType` into an enum).
 */
import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import { dial, TcpServer } from '../../src/net/tcp.js';
import { BUILTIN_TASKS, isBuiltinTaskType } from '../../src/protocol/task-types.js';
import { AsyncQueue } from './async-queue.js';
import {
  UndecodableError,
  V1_JOB_FIELDS,
  V1_TYPES,
  V1Socket,
  decodeV1,
  pick,
  withoutNulls,
  type RawMessage,
} from './v1-wire.js';

const HOST = '127.0.0.1';
const PRIORITY_RANK: Readonly<Record<string, number>> = { HIGH: 0, NORMAL: 1, LOW: 2 };
const CLIENT_REQUESTS = new Set([
  'SUBMIT_JOB',
  'GET_JOB_STATUS',
  'LIST_JOBS',
  'LIST_WORKERS',
  'CANCEL_JOB',
]);

export interface StrictV1Options {
  /** A worker silent this long is dropped (default 300 ms). */
  heartbeatTimeoutMs?: number;
  /** Period of the liveness/deadline/retry sweep (default 10 ms). */
  sweepIntervalMs?: number;
  /** Delay before a failed attempt's job is queued again (default 10 ms). */
  retryDelayMs?: number;
  /** Execution deadline of one attempt (default 60000 ms). */
  taskTimeoutMs?: number;
  /** Attempts per job unless the submission says otherwise (default 3). */
  maxAttempts?: number;
  /** Non-terminal jobs allowed; more submissions are rejected (default 10000). */
  maxActiveJobs?: number;
}

interface FakeJob {
  jobId: string;
  seq: number;
  taskType: string;
  payload: Record<string, unknown>;
  state: 'QUEUED' | 'RUNNING' | 'RETRY_WAIT' | 'COMPLETED' | 'FAILED' | 'CANCELLED';
  attempts: number;
  maxAttempts: number;
  workerId: string | null;
  result: string | null;
  error: string | null;
  createdAtMillis: number;
  updatedAtMillis: number;
  priority: string;
  idempotencyKey: string | null;
  attemptId: string | null;
  deadlineAtMs: number;
  retryAtMs: number;
}

interface FakeWorker {
  workerId: string;
  capacity: number;
  socket: V1Socket;
  running: Set<string>;
  lastHeartbeatMillis: number;
}

/** Frames the fake saw, for assertions. */
export interface V1Observation {
  port: 'client' | 'worker';
  /** The raw `type` field of the frame (undefined when there was none). */
  type: string | undefined;
  /** Null when decoded; else why not. */
  undecodable: string | null;
}

export class StrictV1Coordinator {
  workerPort = 0;
  clientPort = 0;
  /** Every frame received, decodable or not, in order. */
  readonly seen: V1Observation[] = [];
  /** Workers dropped, with the reason. */
  readonly dropped: { workerId: string; reason: string }[] = [];
  readonly #options: Required<StrictV1Options>;
  readonly #jobs = new Map<string, FakeJob>();
  readonly #workers = new Map<string, FakeWorker>();
  readonly #keys = new Map<string, string>();
  readonly #clientServer: TcpServer;
  readonly #workerServer: TcpServer;
  #seq = 0;
  #sweep: NodeJS.Timeout | null = null;

  private constructor(options: StrictV1Options) {
    this.#options = {
      heartbeatTimeoutMs: options.heartbeatTimeoutMs ?? 300,
      sweepIntervalMs: options.sweepIntervalMs ?? 10,
      retryDelayMs: options.retryDelayMs ?? 10,
      taskTimeoutMs: options.taskTimeoutMs ?? 60_000,
      maxAttempts: options.maxAttempts ?? 3,
      maxActiveJobs: options.maxActiveJobs ?? 10_000,
    };
    this.#clientServer = new TcpServer((socket) => this.#acceptClient(socket));
    this.#workerServer = new TcpServer((socket) => this.#acceptWorker(socket));
  }

  static async start(options: StrictV1Options = {}): Promise<StrictV1Coordinator> {
    const fake = new StrictV1Coordinator(options);
    fake.workerPort = await fake.#workerServer.listen(0, HOST);
    fake.clientPort = await fake.#clientServer.listen(0, HOST);
    fake.#sweep = setInterval(() => fake.#sweepOnce(), fake.#options.sweepIntervalMs);
    return fake;
  }

  /** Types of the frames received on one port. */
  typesSeen(port: 'client' | 'worker'): (string | undefined)[] {
    return this.seen.filter((s) => s.port === port).map((s) => s.type);
  }

  /** A job's v1 snapshot, or undefined. */
  job(jobId: string): Record<string, unknown> | undefined {
    const job = this.#jobs.get(jobId);
    return job === undefined ? undefined : snapshotOf(job);
  }

  /**
   * Adds `count` COMPLETED jobs directly (no worker), oldest first, for
   * listing tests; returns their ids newest first.
   */
  seedCompleted(count: number, taskType = 'SHA256'): string[] {
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const now = Date.now();
      const job: FakeJob = {
        jobId: randomUUID(),
        seq: ++this.#seq,
        taskType,
        payload: { text: `seed ${i}` },
        state: 'COMPLETED',
        attempts: 1,
        maxAttempts: this.#options.maxAttempts,
        workerId: null,
        result: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        error: null,
        createdAtMillis: now,
        updatedAtMillis: now,
        priority: 'NORMAL',
        idempotencyKey: null,
        attemptId: null,
        deadlineAtMs: 0,
        retryAtMs: 0,
      };
      this.#jobs.set(job.jobId, job);
      ids.push(job.jobId);
    }
    return ids.reverse();
  }

  /** Live worker ids, sorted. */
  workerIds(): string[] {
    return [...this.#workers.keys()].sort();
  }

  async close(): Promise<void> {
    if (this.#sweep !== null) clearInterval(this.#sweep);
    this.#sweep = null;
    for (const worker of this.#workers.values()) worker.socket.destroy();
    await Promise.all([this.#clientServer.close(), this.#workerServer.close()]);
  }

  // ---- client port ----------------------------------------------------------

  #acceptClient(socket: Socket): void {
    const conn: V1Socket = new V1Socket(socket, {
      onFrame: (payload) => this.#onClientFrame(conn, payload),
    });
  }

  #onClientFrame(conn: V1Socket, payload: Buffer): void {
    let msg: RawMessage;
    try {
      msg = decodeV1(payload);
    } catch (err) {
      if (!(err instanceof UndecodableError)) throw err;
      this.seen.push({ port: 'client', type: rawType(payload), undecodable: err.message });
      conn.send({
        type: 'ERROR',
        message: `Malformed request: Undecodable message: ${err.message}`,
      });
      conn.end();
      return;
    }
    this.seen.push({ port: 'client', type: msg.type, undecodable: null });
    if (!CLIENT_REQUESTS.has(msg.type)) {
      conn.send({ type: 'ERROR', message: `Unsupported request: ${msg.type}` });
      return;
    }
    if (msg.type === 'SUBMIT_JOB' && !isBuiltinTaskType(String(msg.taskType))) {
      const reason =
        `Cannot deserialize value of type 'TaskType' from String ` +
        `${JSON.stringify(msg.taskType)}: not one of the values accepted for Enum class`;
      this.seen[this.seen.length - 1] = { port: 'client', type: msg.type, undecodable: reason };
      conn.send({ type: 'ERROR', message: `Malformed request: Undecodable message: ${reason}` });
      conn.end();
      return;
    }
    try {
      conn.send(this.#answer(msg));
    } catch (err) {
      // A reply over the frame limit: the reference fails the request and closes.
      conn.send({ type: 'ERROR', message: `Internal error: ${(err as Error).message}` });
      conn.end();
    }
    this.#schedule();
  }

  #answer(msg: RawMessage): Record<string, unknown> {
    switch (msg.type) {
      case 'SUBMIT_JOB':
        return this.#submit(msg);
      case 'GET_JOB_STATUS': {
        const job = this.#jobs.get(String(msg.jobId));
        if (job === undefined) return unknownJob(msg.jobId);
        return { type: 'JOB_STATUS', job: snapshotOf(job) };
      }
      case 'LIST_JOBS': {
        const jobs = [...this.#jobs.values()].sort((a, b) => b.seq - a.seq).map(snapshotOf);
        return { type: 'JOB_LIST', jobs };
      }
      case 'LIST_WORKERS': {
        const workers = [...this.#workers.values()]
          .sort((a, b) => (a.workerId < b.workerId ? -1 : 1))
          .map((w) => ({
            workerId: w.workerId,
            capacity: w.capacity,
            activeTasks: w.running.size,
            lastHeartbeatMillis: w.lastHeartbeatMillis,
          }));
        return { type: 'WORKER_LIST', workers };
      }
      case 'CANCEL_JOB':
        return this.#cancel(String(msg.jobId));
      default:
        return { type: 'ERROR', message: `Unsupported request: ${msg.type}` };
    }
  }

  #submit(msg: RawMessage): Record<string, unknown> {
    const taskType = String(msg.taskType);
    const payload = (msg.payload ?? {}) as Record<string, unknown>;
    const invalid = payloadProblem(taskType, payload);
    if (invalid !== null) return { type: 'ERROR', message: `Invalid payload: ${invalid}` };
    const requested = typeof msg.maxAttempts === 'number' ? msg.maxAttempts : 0;
    const maxAttempts = requested > 0 ? requested : this.#options.maxAttempts;
    const priority = typeof msg.priority === 'string' ? msg.priority : 'NORMAL';
    if (!(priority in PRIORITY_RANK)) {
      return { type: 'ERROR', message: `Malformed request: bad priority ${priority}` };
    }
    const key = typeof msg.idempotencyKey === 'string' ? msg.idempotencyKey : null;
    const fingerprint = JSON.stringify([taskType, payload, maxAttempts, priority]);
    if (key !== null) {
      const known = this.#keys.get(key);
      if (known !== undefined) {
        const [jobId, print] = JSON.parse(known) as [string, string];
        if (print === fingerprint) return { type: 'JOB_SUBMITTED', jobId };
        return { type: 'ERROR', message: `Idempotency key ${key} was used for another submission` };
      }
    }
    const active = [...this.#jobs.values()].filter((j) => !isTerminal(j.state)).length;
    if (active >= this.#options.maxActiveJobs) {
      const limit = this.#options.maxActiveJobs;
      return {
        type: 'SUBMIT_REJECTED',
        reason: 'too many active jobs',
        activeCount: active,
        limit,
        retryable: true,
      };
    }
    const now = Date.now();
    const job: FakeJob = {
      jobId: randomUUID(),
      seq: ++this.#seq,
      taskType,
      payload,
      state: 'QUEUED',
      attempts: 0,
      maxAttempts,
      workerId: null,
      result: null,
      error: null,
      createdAtMillis: now,
      updatedAtMillis: now,
      priority,
      idempotencyKey: key,
      attemptId: null,
      deadlineAtMs: 0,
      retryAtMs: 0,
    };
    this.#jobs.set(job.jobId, job);
    if (key !== null) this.#keys.set(key, JSON.stringify([job.jobId, fingerprint]));
    return { type: 'JOB_SUBMITTED', jobId: job.jobId };
  }

  #cancel(jobId: string): Record<string, unknown> {
    const job = this.#jobs.get(jobId);
    if (job === undefined) return unknownJob(jobId);
    if (isTerminal(job.state))
      return { type: 'JOB_CANCEL', cancelled: false, job: snapshotOf(job) };
    if (job.state === 'RUNNING' && job.workerId !== null) {
      const worker = this.#workers.get(job.workerId);
      worker?.running.delete(job.jobId);
      worker?.socket.send({ type: 'TASK_CANCEL', jobId: job.jobId, attemptId: job.attemptId });
    }
    this.#end(job, 'CANCELLED', { error: job.error });
    return { type: 'JOB_CANCEL', cancelled: true, job: snapshotOf(job) };
  }

  // ---- worker port ----------------------------------------------------------

  #acceptWorker(socket: Socket): void {
    let workerId: string | null = null;
    const conn: V1Socket = new V1Socket(socket, {
      onFrame: (payload) => {
        workerId = this.#onWorkerFrame(conn, workerId, payload);
      },
    });
    void conn.closed.then(() => {
      const worker = workerId === null ? undefined : this.#workers.get(workerId);
      if (worker !== undefined && worker.socket === conn) this.#lose(worker, 'connection closed');
    });
  }

  /** Handles one frame; returns the registered worker id of the connection. */
  #onWorkerFrame(conn: V1Socket, workerId: string | null, payload: Buffer): string | null {
    let msg: RawMessage;
    try {
      msg = decodeV1(payload);
    } catch (err) {
      if (!(err instanceof UndecodableError)) throw err;
      this.seen.push({ port: 'worker', type: rawType(payload), undecodable: err.message });
      this.#violation(conn, workerId, `undecodable message: ${err.message}`);
      return workerId;
    }
    this.seen.push({ port: 'worker', type: msg.type, undecodable: null });
    if (workerId === null) return this.#register(conn, msg);
    const worker = this.#workers.get(workerId);
    if (worker === undefined || worker.socket !== conn) {
      conn.destroy();
      return workerId;
    }
    if (msg.type === 'HEARTBEAT') {
      worker.lastHeartbeatMillis = Date.now();
    } else if (msg.type === 'TASK_RESULT') {
      this.#result(worker, msg);
    } else {
      this.#violation(conn, workerId, `${msg.type} is not legal after registration`);
    }
    return workerId;
  }

  #register(conn: V1Socket, msg: RawMessage): string | null {
    if (msg.type !== 'WORKER_REGISTER') {
      conn.send({ type: 'ERROR', message: `Expected WORKER_REGISTER, got ${msg.type}` });
      conn.end();
      return null;
    }
    const workerId = typeof msg.workerId === 'string' ? msg.workerId : '';
    const capacity = typeof msg.capacity === 'number' ? msg.capacity : 0;
    if (workerId.trim() === '' || capacity < 1 || capacity > 1024) {
      conn.send({ type: 'ERROR', message: 'Invalid registration: workerId or capacity' });
      conn.end();
      return null;
    }
    const previous = this.#workers.get(workerId);
    if (previous !== undefined) this.#lose(previous, 'worker re-registered');
    const worker: FakeWorker = {
      workerId,
      capacity,
      socket: conn,
      running: new Set(),
      lastHeartbeatMillis: Date.now(),
    };
    this.#workers.set(workerId, worker);
    conn.send({ type: 'WORKER_REGISTERED', workerId });
    this.#schedule();
    return workerId;
  }

  #violation(conn: V1Socket, workerId: string | null, reason: string): void {
    const worker = workerId === null ? undefined : this.#workers.get(workerId);
    if (worker !== undefined && worker.socket === conn) this.#lose(worker, reason);
    else conn.destroy();
  }

  #result(worker: FakeWorker, msg: RawMessage): void {
    const job = this.#jobs.get(String(msg.jobId));
    // Stale (another lease, or no longer running): logged and ignored by the reference.
    if (job === undefined || job.state !== 'RUNNING' || job.attemptId !== msg.attemptId) return;
    worker.running.delete(job.jobId);
    if (msg.success === true) {
      this.#end(job, 'COMPLETED', { result: typeof msg.result === 'string' ? msg.result : null });
    } else {
      this.#attemptFailed(job, typeof msg.error === 'string' ? msg.error : 'failed');
    }
    this.#schedule();
  }

  #lose(worker: FakeWorker, reason: string): void {
    if (this.#workers.get(worker.workerId) !== worker) return;
    this.#workers.delete(worker.workerId);
    this.dropped.push({ workerId: worker.workerId, reason });
    worker.socket.destroy();
    for (const jobId of worker.running) {
      const job = this.#jobs.get(jobId);
      if (job?.state === 'RUNNING') this.#attemptFailed(job, `worker lost: ${reason}`);
    }
    worker.running.clear();
    this.#schedule();
  }

  // ---- job state --------------------------------------------------------------

  #attemptFailed(job: FakeJob, error: string): void {
    if (job.attempts >= job.maxAttempts) {
      this.#end(job, 'FAILED', { error: `${error} (all ${job.maxAttempts} attempts used)` });
      return;
    }
    job.state = 'RETRY_WAIT';
    job.workerId = null;
    job.attemptId = null;
    job.error = error;
    job.retryAtMs = Date.now() + this.#options.retryDelayMs;
    job.updatedAtMillis = Date.now();
  }

  #end(
    job: FakeJob,
    state: 'COMPLETED' | 'FAILED' | 'CANCELLED',
    fields: { result?: string | null; error?: string | null },
  ): void {
    job.state = state;
    job.workerId = null;
    job.attemptId = null;
    if (fields.result !== undefined) job.result = fields.result;
    if (fields.error !== undefined) job.error = fields.error;
    job.updatedAtMillis = Date.now();
  }

  #sweepOnce(): void {
    const now = Date.now();
    for (const worker of [...this.#workers.values()]) {
      if (now - worker.lastHeartbeatMillis > this.#options.heartbeatTimeoutMs) {
        this.#lose(worker, 'heartbeat timeout');
      }
    }
    for (const job of this.#jobs.values()) {
      if (job.state === 'RETRY_WAIT' && job.retryAtMs <= now) job.state = 'QUEUED';
      if (job.state === 'RUNNING' && job.deadlineAtMs <= now) {
        const worker = job.workerId === null ? undefined : this.#workers.get(job.workerId);
        worker?.running.delete(job.jobId);
        worker?.socket.send({ type: 'TASK_CANCEL', jobId: job.jobId, attemptId: job.attemptId });
        this.#attemptFailed(job, 'attempt timed out');
      }
    }
    this.#schedule();
  }

  /** Assigns queued jobs (priority, then submission order) to the workers with most free slots. */
  #schedule(): void {
    const queued = [...this.#jobs.values()]
      .filter((j) => j.state === 'QUEUED')
      .sort(
        (a, b) =>
          (PRIORITY_RANK[a.priority] ?? 1) - (PRIORITY_RANK[b.priority] ?? 1) || a.seq - b.seq,
      );
    for (const job of queued) {
      const worker = this.#freestWorker();
      if (worker === undefined) return;
      job.state = 'RUNNING';
      job.attempts++;
      job.workerId = worker.workerId;
      job.attemptId = randomUUID();
      job.deadlineAtMs = Date.now() + this.#options.taskTimeoutMs;
      job.updatedAtMillis = Date.now();
      worker.running.add(job.jobId);
      worker.socket.send({
        type: 'TASK_ASSIGN',
        jobId: job.jobId,
        attemptId: job.attemptId,
        attemptNumber: job.attempts,
        taskType: job.taskType,
        payload: job.payload,
      });
    }
  }

  #freestWorker(): FakeWorker | undefined {
    let best: FakeWorker | undefined;
    for (const w of this.#workers.values()) {
      const free = w.capacity - w.running.size;
      if (free <= 0) continue;
      const bestFree = best === undefined ? 0 : best.capacity - best.running.size;
      if (
        best === undefined ||
        free > bestFree ||
        (free === bestFree && w.workerId < best.workerId)
      ) {
        best = w;
      }
    }
    return best;
  }
}

function isTerminal(state: FakeJob['state']): boolean {
  return state === 'COMPLETED' || state === 'FAILED' || state === 'CANCELLED';
}

function snapshotOf(job: FakeJob): Record<string, unknown> {
  return pick(job as unknown as Record<string, unknown>, V1_JOB_FIELDS);
}

function unknownJob(jobId: unknown): Record<string, unknown> {
  return { type: 'ERROR', message: `Unknown job: ${String(jobId)}` };
}

/** The `type` of a frame that did not decode, when one can be read. */
function rawType(payload: Buffer): string | undefined {
  try {
    const raw = JSON.parse(payload.toString('utf8')) as { type?: unknown };
    return typeof raw.type === 'string' ? raw.type : undefined;
  } catch {
    return undefined;
  }
}

/** Why a built-in payload is invalid (naming the field), or null. */
function payloadProblem(taskType: string, payload: Record<string, unknown>): string | null {
  if (!isBuiltinTaskType(taskType)) return `unknown task type ${taskType}`;
  const field = BUILTIN_TASKS[taskType].field;
  const value = payload[field.name];
  if (field.kind === 'integer') {
    const ok =
      typeof value === 'number' &&
      Number.isInteger(value) &&
      value >= field.min &&
      value <= field.max;
    return ok ? null : `${field.name} must be an integer in ${field.min}..${field.max}`;
  }
  const ok = typeof value === 'string' && value.length <= field.maxChars;
  return ok ? null : `${field.name} must be a string of at most ${field.maxChars} characters`;
}

// ---- v1-style drivers for the real dtp coordinator ------------------------------

/** Reply types a v1 client understands. */
const V1_CLIENT_REPLIES = new Set([
  'JOB_SUBMITTED',
  'SUBMIT_REJECTED',
  'JOB_STATUS',
  'JOB_LIST',
  'WORKER_LIST',
  'JOB_CANCEL',
  'ERROR',
]);

/**
 * A client that speaks v1 only: it sends the v1 fields of the five v1
 * requests (no nulls, no extension), matches replies in order, and fails on
 * any reply type a v1 client could not decode.
 */
export class V1Client {
  readonly #conn: V1Socket;
  readonly #replies = new AsyncQueue<RawMessage>('reply');
  /** Frames it could not have decoded (should stay empty). */
  readonly foreign: string[] = [];

  private constructor(socket: Socket) {
    this.#conn = new V1Socket(socket, {
      onFrame: (payload) => {
        try {
          const msg = decodeV1(payload);
          if (!V1_CLIENT_REPLIES.has(msg.type)) this.foreign.push(msg.type);
          this.#replies.push(msg);
        } catch (err) {
          this.foreign.push((err as Error).message);
        }
      },
    });
  }

  static async connect(port: number): Promise<V1Client> {
    return new V1Client(await dial(HOST, port, 5_000));
  }

  async request(msg: Record<string, unknown>, timeoutMs = 5_000): Promise<RawMessage> {
    if (!(String(msg.type) in V1_TYPES)) throw new Error(`${String(msg.type)} is not a v1 request`);
    this.#conn.send(withoutNulls(msg));
    return this.#replies.next(timeoutMs);
  }

  async submit(
    taskType: string,
    payload: Record<string, unknown>,
    extra: { maxAttempts?: number; idempotencyKey?: string; priority?: string } = {},
  ): Promise<string> {
    const reply = await this.request({ type: 'SUBMIT_JOB', taskType, payload, ...extra });
    if (reply.type !== 'JOB_SUBMITTED') throw new Error(`submit got ${JSON.stringify(reply)}`);
    return String(reply.jobId);
  }

  async status(jobId: string): Promise<Record<string, unknown>> {
    const reply = await this.request({ type: 'GET_JOB_STATUS', jobId });
    if (reply.type !== 'JOB_STATUS') throw new Error(`status got ${JSON.stringify(reply)}`);
    return reply.job as Record<string, unknown>;
  }

  async list(): Promise<Record<string, unknown>[]> {
    const reply = await this.request({ type: 'LIST_JOBS' });
    if (reply.type !== 'JOB_LIST') throw new Error(`list got ${JSON.stringify(reply)}`);
    return reply.jobs as Record<string, unknown>[];
  }

  async workers(): Promise<Record<string, unknown>[]> {
    const reply = await this.request({ type: 'LIST_WORKERS' });
    if (reply.type !== 'WORKER_LIST') throw new Error(`workers got ${JSON.stringify(reply)}`);
    return reply.workers as Record<string, unknown>[];
  }

  async cancel(jobId: string): Promise<RawMessage> {
    return this.request({ type: 'CANCEL_JOB', jobId });
  }

  close(): void {
    this.#conn.destroy();
  }
}

/** Messages a v1 worker understands. */
const V1_WORKER_INBOUND = new Set(['WORKER_REGISTERED', 'TASK_ASSIGN', 'TASK_CANCEL', 'ERROR']);

/**
 * A worker that speaks v1 only: registers with `workerId` and `capacity`
 * alone, heartbeats, records assignments and cancels, sends the results a
 * test chooses, and records any message a v1 worker could not decode.
 */
export class V1Worker {
  readonly workerId: string;
  readonly assignments = new AsyncQueue<RawMessage>('TASK_ASSIGN');
  readonly cancels = new AsyncQueue<RawMessage>('TASK_CANCEL');
  /** Every message received after registration, in order (types). */
  readonly received: string[] = [];
  /** Frames it could not have decoded, or message types it does not know. */
  readonly foreign: string[] = [];
  /** The WORKER_REGISTERED it got, exactly as sent. */
  registered: Record<string, unknown> | null = null;
  readonly #conn: V1Socket;
  #heartbeat: NodeJS.Timeout | null = null;

  private constructor(workerId: string, socket: Socket, onRegistered: () => void) {
    this.workerId = workerId;
    this.#conn = new V1Socket(socket, {
      onFrame: (payload) => {
        const raw = JSON.parse(payload.toString('utf8')) as Record<string, unknown>;
        let msg: RawMessage;
        try {
          msg = decodeV1(payload);
        } catch (err) {
          this.foreign.push((err as Error).message);
          return;
        }
        if (!V1_WORKER_INBOUND.has(msg.type)) this.foreign.push(msg.type);
        if (msg.type === 'WORKER_REGISTERED' && this.registered === null) {
          this.registered = raw;
          onRegistered();
          return;
        }
        this.received.push(msg.type);
        if (msg.type === 'TASK_ASSIGN') this.assignments.push(msg);
        if (msg.type === 'TASK_CANCEL') this.cancels.push(msg);
      },
    });
    void this.#conn.closed.then(() => this.stopHeartbeats());
  }

  /** Connects, registers and waits for WORKER_REGISTERED. */
  static async register(
    port: number,
    workerId: string,
    capacity = 1,
    heartbeatMs = 20,
  ): Promise<V1Worker> {
    const socket = await dial(HOST, port, 5_000);
    let registered!: () => void;
    const done = new Promise<void>((resolve) => (registered = resolve));
    const worker = new V1Worker(workerId, socket, registered);
    worker.#conn.send({ type: 'WORKER_REGISTER', workerId, capacity });
    const closedFirst = worker.#conn.closed.then(() => {
      if (worker.registered === null) {
        throw new Error(`${workerId}: connection closed before WORKER_REGISTERED`);
      }
    });
    await Promise.race([done, closedFirst]);
    if (heartbeatMs > 0) {
      worker.#heartbeat = setInterval(
        () => worker.#conn.send({ type: 'HEARTBEAT', workerId }),
        heartbeatMs,
      );
    }
    return worker;
  }

  get closed(): Promise<void> {
    return this.#conn.closed;
  }

  stopHeartbeats(): void {
    if (this.#heartbeat !== null) clearInterval(this.#heartbeat);
    this.#heartbeat = null;
  }

  succeed(assign: RawMessage, result: string): void {
    this.#result(assign, true, result);
  }

  fail(assign: RawMessage, error: string): void {
    this.#result(assign, false, error);
  }

  #result(assign: RawMessage, success: boolean, text: string): void {
    this.#conn.send({
      type: 'TASK_RESULT',
      workerId: this.workerId,
      jobId: assign.jobId,
      attemptId: assign.attemptId,
      success,
      result: success ? text : null,
      error: success ? null : text,
    });
  }

  /** Abrupt close, as if the process died. */
  close(): void {
    this.stopHeartbeats();
    this.#conn.destroy();
  }
}
