/**
 * A coordinator that speaks raw protocol on the worker port and does only
 * what each test tells it, for testing a real worker: every frame the worker
 * sends is kept in order; registrations are accepted with whatever
 * `features` the test offers (none by default, like a v1 coordinator).
 */
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { FramedConnection } from '../../src/net/framed-connection.js';
import { TcpServer } from '../../src/net/tcp.js';
import type {
  JsonObject,
  Message,
  MessageOf,
  MessageType,
  TaskAssign,
  TaskResult,
} from '../../src/protocol/messages.js';
import { until } from './until.js';

export const HOST = '127.0.0.1';

/** One connection as the fake coordinator sees it: every message kept in order. */
export class FakeSession {
  readonly received: Message[] = [];
  readonly heartbeatAtMs: number[] = [];
  readonly socket: Socket;
  readonly connection: FramedConnection;
  closed = false;

  constructor(socket: Socket) {
    this.socket = socket;
    this.connection = new FramedConnection(socket, {
      onMessage: (msg) => {
        this.received.push(msg);
        if (msg.type === 'HEARTBEAT') this.heartbeatAtMs.push(performance.now());
      },
      onProtocolError: () => void this.connection.destroy('bad frame from worker'),
      onClose: () => {
        this.closed = true;
      },
    });
  }

  all<T extends MessageType>(type: T): MessageOf<T>[] {
    return this.received.filter((msg): msg is MessageOf<T> => msg.type === type);
  }

  /** Every result so far, those that came in TASK_RESULTS included, in order. */
  results(): TaskResult[] {
    return this.received.flatMap((msg) =>
      msg.type === 'TASK_RESULT' ? [msg] : msg.type === 'TASK_RESULTS' ? msg.results : [],
    );
  }

  waitFor<T extends MessageType>(
    type: T,
    accept: (msg: MessageOf<T>) => boolean = () => true,
    timeoutMs = 5_000,
  ): Promise<MessageOf<T>> {
    return until(() => this.all(type).find(accept), { timeoutMs, what: `a ${type}` });
  }

  resultFor(attemptId: string, timeoutMs = 5_000): Promise<TaskResult> {
    return until(() => this.results().find((r) => r.attemptId === attemptId), {
      timeoutMs,
      what: `the result of ${attemptId}`,
    });
  }

  send(msg: Message): void {
    assert.ok(this.connection.send(msg), 'fake coordinator could not send');
  }

  /** Sends a TASK_ASSIGN (with assign limits when `extra` has them); returns the lease. */
  assign(
    jobId: string,
    taskType: string,
    payload: JsonObject,
    attemptNumber = 1,
    extra: Pick<TaskAssign, 'timeoutMillis' | 'maxAttempts'> = {},
  ): string {
    const attemptId = `${jobId}-attempt-${attemptNumber}`;
    this.send({
      type: 'TASK_ASSIGN',
      jobId,
      attemptId,
      attemptNumber,
      taskType,
      payload,
      ...extra,
    });
    return attemptId;
  }
}

/** A coordinator that speaks raw protocol and does only what each test tells it. */
export class FakeCoordinator {
  readonly sessions: FakeSession[] = [];
  readonly server: TcpServer;
  port = 0;
  #accepted = 0;

  private constructor() {
    this.server = new TcpServer((socket) => this.sessions.push(new FakeSession(socket)));
  }

  static async listen(port = 0): Promise<FakeCoordinator> {
    const fake = new FakeCoordinator();
    fake.port = await fake.server.listen(port, HOST);
    return fake;
  }

  /** The next connection, once its WORKER_REGISTER has arrived. */
  async nextRegistration(): Promise<[FakeSession, MessageOf<'WORKER_REGISTER'>]> {
    const index = this.#accepted++;
    const session = await until(() => this.sessions[index], { what: `connection #${index}` });
    return [session, await session.waitFor('WORKER_REGISTER')];
  }

  /** Waits for the next registration and accepts it, offering `features` (none = v1). */
  async acceptNext(features?: string[]): Promise<FakeSession> {
    const [session, register] = await this.nextRegistration();
    session.send({ type: 'WORKER_REGISTERED', workerId: register.workerId, features });
    return session;
  }

  close(): Promise<void> {
    return this.server.close();
  }
}
