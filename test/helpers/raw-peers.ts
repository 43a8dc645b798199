/**
 * Protocol peers for integration tests, speaking raw frames over 127.0.0.1:
 * a {@link RawClient} (requests in, replies matched in order) and a
 * {@link ScriptedWorker} (registers, heartbeats, records assignments and
 * cancels, and sends whatever results a test chooses, stale ones included).
 */
import { dial } from '../../src/net/tcp.js';
import { FramedConnection, type CloseReason } from '../../src/net/framed-connection.js';
import type {
  ClientReply,
  ClientRequest,
  JobSnapshot,
  Message,
  TaskAssign,
  TaskCancel,
  TaskResult,
  WorkerRegister,
} from '../../src/protocol/messages.js';
import { AsyncQueue } from './async-queue.js';

const HOST = '127.0.0.1';

/**
 * Connects and returns a connection whose messages land in a queue, or go to
 * `deliver` once the caller sets it (frames already queued stay queued).
 */
export async function rawConnection(port: number): Promise<{
  conn: FramedConnection;
  inbox: AsyncQueue<Message>;
  closed: Promise<CloseReason>;
  setDeliver: (deliver: (msg: Message) => void) => void;
}> {
  const socket = await dial(HOST, port, 5_000);
  const inbox = new AsyncQueue<Message>('frame');
  let deliver = (msg: Message): void => inbox.push(msg);
  let onClosed!: (reason: CloseReason) => void;
  const closed = new Promise<CloseReason>((resolve) => (onClosed = resolve));
  const conn = new FramedConnection(socket, {
    onMessage: (msg) => deliver(msg),
    onProtocolError: (err) => {
      void conn.destroy(err.message);
    },
    onClose: (reason) => onClosed(reason),
  });
  return { conn, inbox, closed, setDeliver: (next) => (deliver = next) };
}

export class RawClient {
  readonly conn: FramedConnection;
  readonly inbox: AsyncQueue<Message>;

  private constructor(conn: FramedConnection, inbox: AsyncQueue<Message>) {
    this.conn = conn;
    this.inbox = inbox;
  }

  static async connect(port: number): Promise<RawClient> {
    const { conn, inbox } = await rawConnection(port);
    return new RawClient(conn, inbox);
  }

  async request(msg: ClientRequest, timeoutMs = 5_000): Promise<ClientReply> {
    this.conn.send(msg);
    return (await this.inbox.next(timeoutMs)) as ClientReply;
  }

  async submit(
    taskType: string,
    payload: Record<string, unknown>,
    extra: Partial<{
      maxAttempts: number;
      idempotencyKey: string;
      priority: 'HIGH' | 'NORMAL' | 'LOW';
    }> = {},
  ): Promise<string> {
    const reply = await this.request({
      type: 'SUBMIT_JOB',
      taskType,
      payload: payload as never,
      maxAttempts: extra.maxAttempts ?? null,
      idempotencyKey: extra.idempotencyKey ?? null,
      priority: extra.priority ?? null,
    });
    if (reply.type !== 'JOB_SUBMITTED') throw new Error(`submit got ${JSON.stringify(reply)}`);
    return reply.jobId;
  }

  async status(jobId: string): Promise<JobSnapshot> {
    const reply = await this.request({ type: 'GET_JOB_STATUS', jobId });
    if (reply.type !== 'JOB_STATUS') throw new Error(`status got ${JSON.stringify(reply)}`);
    return reply.job;
  }

  /** WAIT_JOB until terminal (or the timeout); returns the snapshot. */
  async wait(jobId: string, timeoutMs = 10_000): Promise<JobSnapshot> {
    const reply = await this.request(
      { type: 'WAIT_JOB', jobId, timeoutMillis: timeoutMs },
      timeoutMs + 5_000,
    );
    if (reply.type !== 'JOB_STATUS') throw new Error(`wait got ${JSON.stringify(reply)}`);
    return reply.job;
  }

  close(): Promise<void> {
    return this.conn.destroy('test done');
  }
}

export interface ScriptedWorkerOptions {
  /** Heartbeat period (default 20 ms); 0 = none. */
  heartbeatMs?: number;
  taskTypes?: string[] | null;
  /** Extension fields of the registration (`slots`, `prefetch`, `heldAttempts`, …). */
  extensions?: Partial<Omit<WorkerRegister, 'type' | 'workerId' | 'capacity' | 'taskTypes'>>;
}

export class ScriptedWorker {
  readonly workerId: string;
  readonly conn: FramedConnection;
  readonly assignments = new AsyncQueue<TaskAssign>('TASK_ASSIGN');
  readonly cancels = new AsyncQueue<TaskCancel>('TASK_CANCEL');
  readonly others = new AsyncQueue<Message>('other frame');
  /** How many assignments each assigning frame carried (1 = a plain TASK_ASSIGN), in order. */
  readonly assignFrames: number[] = [];
  /** Resolves when the coordinator closes the connection. */
  readonly closed: Promise<CloseReason>;
  /** What WORKER_REGISTERED offered (empty: a v1 coordinator). */
  readonly features: readonly string[];
  #heartbeat: NodeJS.Timeout | null = null;

  private constructor(
    workerId: string,
    conn: FramedConnection,
    closed: Promise<CloseReason>,
    features: readonly string[],
  ) {
    this.workerId = workerId;
    this.conn = conn;
    this.closed = closed;
    this.features = features;
  }

  /** Connects, registers and waits for WORKER_REGISTERED. */
  static async register(
    port: number,
    workerId: string,
    capacity = 1,
    options: ScriptedWorkerOptions = {},
  ): Promise<ScriptedWorker> {
    const { conn, inbox, closed, setDeliver } = await rawConnection(port);
    conn.send({
      type: 'WORKER_REGISTER',
      workerId,
      capacity,
      taskTypes: options.taskTypes ?? null,
      ...options.extensions,
    });
    const first = await inbox.next();
    if (first.type !== 'WORKER_REGISTERED')
      throw new Error(`registration got ${JSON.stringify(first)}`);
    const worker = new ScriptedWorker(workerId, conn, closed, first.features ?? []);
    const route = (msg: Message): void => {
      if (msg.type === 'TASK_ASSIGN') {
        worker.assignFrames.push(1);
        worker.assignments.push(msg);
      } else if (msg.type === 'TASK_ASSIGNS') {
        worker.assignFrames.push(msg.attempts.length);
        for (const assign of msg.attempts) worker.assignments.push(assign);
      } else if (msg.type === 'TASK_CANCEL') worker.cancels.push(msg);
      else worker.others.push(msg);
    };
    for (const msg of inbox.drain()) route(msg);
    setDeliver(route); // from now on frames go straight to the typed queues
    const heartbeatMs = options.heartbeatMs ?? 20;
    if (heartbeatMs > 0) worker.#heartbeat = setInterval(() => worker.heartbeat(), heartbeatMs);
    void closed.then(() => worker.stopHeartbeats());
    return worker;
  }

  heartbeat(): void {
    this.conn.send({ type: 'HEARTBEAT', workerId: this.workerId });
  }

  /** Simulates a hung worker: the socket stays open, heartbeats stop. */
  stopHeartbeats(): void {
    if (this.#heartbeat !== null) clearInterval(this.#heartbeat);
    this.#heartbeat = null;
  }

  result(assign: TaskAssign, success: boolean, text: string): TaskResult {
    return {
      type: 'TASK_RESULT',
      workerId: this.workerId,
      jobId: assign.jobId,
      attemptId: assign.attemptId,
      success,
      result: success ? text : null,
      error: success ? null : text,
    };
  }

  succeed(assign: TaskAssign, result: string): void {
    this.conn.send(this.result(assign, true, result));
  }

  fail(assign: TaskAssign, error: string): void {
    this.conn.send(this.result(assign, false, error));
  }

  /** Requeues the attempt (`requeue`): cut off through no doing of its own. */
  requeue(assign: TaskAssign, error: string): void {
    this.conn.send({ ...this.result(assign, false, error), requeue: true });
  }

  send(msg: Message): void {
    this.conn.send(msg);
  }

  /** Abrupt close, as if the worker process died. */
  close(): Promise<void> {
    this.stopHeartbeats();
    return this.conn.destroy('scripted worker closed');
  }
}
