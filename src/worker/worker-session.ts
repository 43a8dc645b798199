/**
 * The worker's session with the coordinator: dial, register, heartbeat,
 * watch the coordinator's liveness, and start over when the connection
 * ends. It knows nothing of attempts: what arrives for them goes to its
 * {@link SessionHost} (the worker), which also says what to register with.
 *
 * Modes (one field, changed only through `#setMode`, which asserts the move):
 *   disconnected  no connection; waiting to dial (at start, between attempts)
 *   connecting    dialling the coordinator
 *   registering   connected, WORKER_REGISTER sent, WORKER_REGISTERED awaited
 *   registered    heartbeating; TASK_ASSIGN and TASK_CANCEL accepted
 *   closed        close() was called; final
 *
 * Messages: sends WORKER_REGISTER and HEARTBEAT (the host sends the rest
 * through {@link WorkerSession.connection}); receives WORKER_REGISTERED,
 * TASK_ASSIGN, TASK_CANCEL, call replies, ERROR, HEARTBEAT_ACK. An ERROR
 * that carries a `requestId` settles that call only (the session goes on);
 * any other ERROR, an unexpected message, or a protocol violation drops the
 * connection, and the session dials again after `reconnectDelayMs` — except
 * a refusal: `ERROR` WORKER_REPLACED (another live registration took this id
 * over), UNAUTHENTICATED (token or client certificate refused) or
 * TLS_REQUIRED, a TLS handshake that failed on a certificate, a registration
 * answered the way a client port answers it (WRONG_PORT, see port-kind.ts),
 * and a coordinator that cannot honour the worker's queues. Those are
 * configuration problems no retry fixes: the session tells the host, which
 * closes ("reconnect forever" is for lost connections, not for refusals).
 *
 * Liveness of the coordinator: WORKER_REGISTER asks for `heartbeatAck`; when
 * the coordinator confirms it in `features`, a coordinator silent for
 * `coordinatorTimeoutMs` (frozen, or cut off by a partition) is treated as a
 * lost connection: dropped and redialled.
 *
 * With several coordinators (`coordinatorHost` = `h1[:p1],h2[:p2],…`, one of
 * which leads) the session walks them with a {@link LeaderFollower}: a
 * standby answers the registration with NOT_LEADER and, when it knows, the
 * leader's address, which is dialled next at once; a failed dial moves on to
 * the next address; it pauses `reconnectDelayMs` only after a whole round
 * failed or a registered session ended.
 *
 * A sharded coordinator's public worker port answers the registration with
 * NOT_LEADER and the shard map (`ERROR.shards`): the session hands the map
 * to its host (the worker opens one session per shard leader, shard-map.ts)
 * and otherwise treats it as any NOT_LEADER; the host closes the session
 * when it has no further use for it.
 */
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { resultBatch } from '../net/frame-batch.js';
import { FramedConnection, describeCloseReason } from '../net/framed-connection.js';
import { parseAddressList, type HostPort } from '../net/address.js';
import { LeaderFollower, type TryOutcome } from '../net/leader-follower.js';
import {
  WRONG_PORT_CODE,
  isClientPortAnswer,
  workerOnClientPortMessage,
} from '../net/port-kind.js';
import { DialError, dial } from '../net/tcp.js';
import type { Logger } from '../observability/logger.js';
import { DtpError, describeError } from '../protocol/errors.js';
import { ErrorCode, LocalErrorCode } from '../protocol/error-codes.js';
import { messageToJson } from '../protocol/codec.js';
import { parseFeatures, type Feature } from '../protocol/features.js';
import { clipError } from '../protocol/limits.js';
import {
  isCallReply,
  isCoordinatorToWorker,
  type CallReply,
  type ErrorMessage,
  type JsonObject,
  type Message,
  type ShardInfo,
  type TaskAssign,
  type TaskCancel,
  type WorkerRegister,
  type WorkerRegistered,
} from '../protocol/messages.js';
import { CoordinatorWatchdog } from './coordinator-watchdog.js';
import { Heartbeat } from './heartbeat.js';
import {
  DEFAULT_CONNECT_TIMEOUT_MS,
  MIN_DEFAULT_COORDINATOR_TIMEOUT_MS,
  type WorkerOptions,
} from './options.js';
import type { CallOutcome } from './thread-messages.js';

/** ERROR codes that stop the worker instead of a reconnect. */
const REFUSAL_CODES = [
  ErrorCode.WorkerReplaced,
  ErrorCode.Unauthenticated,
  ErrorCode.TlsRequired,
] as const;
type RefusalCode = (typeof REFUSAL_CODES)[number];

function isRefusal(code: string | null | undefined): code is RefusalCode {
  return REFUSAL_CODES.some((refusal) => refusal === code);
}

/** The codes a refusal stops the worker with. */
export type RefusalReason =
  | RefusalCode
  | DialError['code']
  | typeof WRONG_PORT_CODE
  | typeof LocalErrorCode.UnsupportedFeature;

export type WorkerMode = 'disconnected' | 'connecting' | 'registering' | 'registered' | 'closed';

const TRANSITIONS: { readonly [M in WorkerMode]: readonly WorkerMode[] } = {
  disconnected: ['connecting', 'closed'],
  connecting: ['registering', 'disconnected', 'closed'],
  registering: ['registered', 'disconnected', 'closed'],
  registered: ['disconnected', 'closed'],
  closed: [],
};

/** What the session hands the worker, and asks of it. */
export interface SessionHost {
  /** The registration's fields (read at each registration: held attempts change). */
  registration(): Omit<WorkerRegister, 'type' | 'workerId'>;
  /** A connection is open (registration follows). */
  onConnected(): void;
  /** Registered: `features` is what this coordinator offers. */
  onRegistered(connection: FramedConnection, features: ReadonlySet<Feature>): void;
  onAssign(connection: FramedConnection, msg: TaskAssign): void;
  onCancel(msg: TaskCancel): void;
  /** The answer to a call; false when no such call is open. */
  onCallAnswer(connection: FramedConnection, requestId: number, outcome: CallOutcome): boolean;
  /** The connection ended (`registered`: it had registered us). */
  onDisconnected(connection: FramedConnection, reason: string, registered: boolean): void;
  /** The coordinator refused this worker for good: the host closes. */
  onRefused(error: DtpError): void;
  /**
   * True when the host registered a newer session of this worker in this
   * one's place on purpose: the WORKER_REPLACED that follows is expected,
   * not a refusal.
   */
  replacedOnPurpose(): boolean;
  /** The registration was answered NOT_LEADER with the shard map: a sharded coordinator. */
  onShardMap(shards: readonly ShardInfo[]): void;
}

export class WorkerSession {
  readonly #options: WorkerOptions;
  readonly #log: Logger;
  readonly #host: SessionHost;
  readonly #heartbeat: Heartbeat;
  readonly #watchdog: CoordinatorWatchdog;
  /** The coordinators to try, and which one leads as far as we know. */
  readonly #follower: LeaderFollower;
  /** Aborted by close() or stopDialling(): cancels a dial or a reconnect wait in progress. */
  readonly #abort = new AbortController();
  #mode: WorkerMode = 'disconnected';
  #connection: FramedConnection | null = null;
  /** What the coordinator of the current session offers (empty: v1, or none yet). */
  #features: ReadonlySet<Feature> = new Set();
  /** The last dial failed; further failures are logged at debug level only. */
  #unreachable = false;
  /** The current connection was answered NOT_LEADER, naming this leader (or null). */
  #notLeader: { leader: string | null } | null = null;
  #dialling = true;
  #loop: Promise<void> = Promise.resolve();

  constructor(options: WorkerOptions, log: Logger, host: SessionHost) {
    this.#options = options;
    this.#log = log;
    this.#host = host;
    this.#heartbeat = new Heartbeat(options.heartbeatIntervalMs, () => this.#sendHeartbeat());
    const silenceMs =
      options.coordinatorTimeoutMs ??
      Math.max(3 * options.heartbeatIntervalMs, MIN_DEFAULT_COORDINATOR_TIMEOUT_MS);
    this.#watchdog = new CoordinatorWatchdog(silenceMs, (silentMs) => {
      const connection = this.#connection;
      if (connection !== null) {
        this.#drop(connection, `coordinator silent for ${silentMs} ms (no heartbeat ack)`);
      }
    });
    this.#follower = new LeaderFollower(
      parseAddressList(options.coordinatorHost, options.coordinatorPort),
      options.coordinatorPort,
    );
  }

  /** Starts dialling in the background (once). */
  start(beforeFirstDial: () => Promise<void>): void {
    this.#loop = beforeFirstDial().then(() => this.#runLoop());
  }

  get mode(): WorkerMode {
    return this.#mode;
  }

  get registered(): boolean {
    return this.#mode === 'registered';
  }

  get closed(): boolean {
    return this.#mode === 'closed';
  }

  /** The open connection, registered or not yet; null between connections. */
  get connection(): FramedConnection | null {
    return this.#connection;
  }

  /** The extensions the current coordinator offers (empty when none or not registered). */
  get features(): ReadonlySet<Feature> {
    return this.#features;
  }

  /** The coordinator being talked to (or tried next), as `host:port`. */
  get coordinator(): string {
    return this.#follower.address;
  }

  /** No more dials or reconnect waits (a draining worker); the current connection stays. */
  stopDialling(): void {
    this.#dialling = false;
    this.#abort.abort();
  }

  /** Ends the session for good: no more dials or heartbeats; the connection is closed. */
  async close(): Promise<void> {
    const connection = this.#connection;
    this.#setMode('closed');
    this.stopDialling();
    const heartbeatClosed = this.#heartbeat.close();
    this.#watchdog.stop();
    await Promise.all([heartbeatClosed, connection?.close('worker closing'), this.#loop]);
  }

  /** Drops a connection (the host found its peer misbehaving). */
  drop(connection: FramedConnection, reason: string): void {
    this.#drop(connection, reason);
  }

  /** The coordinator refused us: a configuration problem, so stop for good. */
  refuse(code: RefusalReason, message: string): void {
    if (this.closed) return;
    if (code === ErrorCode.WorkerReplaced && this.#host.replacedOnPurpose()) {
      this.#log.info('replaced by a newer session of this worker');
      return; // the coordinator closes this connection next
    }
    this.#log.error({ code, message }, 'refused by the coordinator: stopping (no reconnect)');
    this.#host.onRefused(new DtpError(code, message));
  }

  #setMode(next: WorkerMode): void {
    const current = this.#mode;
    if (current === next && next === 'closed') return;
    assert(TRANSITIONS[current].includes(next), `worker mode ${current} -> ${next} is not allowed`);
    this.#mode = next;
  }

  #stopsDialling(): boolean {
    return this.closed || !this.#dialling;
  }

  /**
   * Dials the coordinators until one registers this worker, serves until
   * that session ends, and starts over: with several coordinators straight
   * on to the next one (or the leader a standby named) until a whole round
   * failed, then after `reconnectDelayMs` (leader-follower.ts).
   */
  async #runLoop(): Promise<void> {
    const delayMs = this.#options.reconnectDelayMs;
    const follow = {
      pause: { firstMs: delayMs, longestMs: delayMs },
      signal: this.#abort.signal,
      retry: () => !this.#stopsDialling(),
    };
    while (!this.#stopsDialling()) {
      await this.#follower.follow((address) => this.#session(address), follow);
      // A registered session ended: a pause before the next round.
      if (this.#stopsDialling()) return;
      if (this.#follower.shouldPause()) await this.#wait(delayMs);
    }
  }

  async #wait(ms: number): Promise<void> {
    try {
      await delay(ms, undefined, { signal: this.#abort.signal });
    } catch {
      // Aborted by close(); the loop checks the mode next.
    }
  }

  /** One try at `address`: dial, register, serve until the connection ends; what it came to. */
  async #session(address: HostPort): Promise<TryOutcome<void>> {
    try {
      this.#setMode('connecting');
      const socket = await this.#dial(address);
      if (socket === null) return { kind: 'failed', error: null };
      if (this.closed) {
        socket.destroy();
        return { kind: 'failed', error: null };
      }
      return await this.#serve(socket);
    } catch (err) {
      // A bug, not a network condition: log it and keep the worker alive.
      this.#log.error({ err: describeError(err) }, 'connection loop failed');
      if (this.#connection !== null) void this.#connection.destroy('connection loop failed');
      if (!this.closed && this.#mode !== 'disconnected') this.#setMode('disconnected');
      return { kind: 'failed', error: err };
    }
  }

  /** One dial; null (mode back to disconnected) when it fails. */
  async #dial({ host, port }: HostPort): Promise<Socket | null> {
    const timeoutMs = this.#connectTimeoutMs();
    try {
      return await dial(host, port, timeoutMs, this.#abort.signal, this.#options.tls ?? null);
    } catch (err) {
      if (this.closed) return null;
      this.#setMode('disconnected');
      if (err instanceof DialError && err.refused) this.refuse(err.code, err.message);
      else this.#onDialFailed(describeError(err));
      return null;
    }
  }

  #onDialFailed(reason: string): void {
    const delayMs = this.#options.reconnectDelayMs;
    if (this.#unreachable) {
      this.#log.debug({ reason, delayMs }, 'connect attempt failed');
      return;
    }
    this.#unreachable = true;
    this.#log.warn(
      { coordinator: this.coordinator, reason, delayMs },
      'coordinator unreachable; reconnecting until it is back',
    );
  }

  #connectTimeoutMs(): number {
    return this.#options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  }

  /**
   * Registers on a fresh socket; resolves when that connection has ended,
   * with what it came to: served (it registered us), a NOT_LEADER, or a
   * failure before registration.
   */
  #serve(socket: Socket): Promise<TryOutcome<void>> {
    return new Promise((resolve) => {
      const connection: FramedConnection = new FramedConnection(
        socket,
        {
          onMessage: (msg) => this.#onMessage(connection, msg),
          onProtocolError: (err) =>
            this.#drop(connection, `protocol error from coordinator (${err.code}): ${err.message}`),
          onClose: (reason) => {
            const registered = this.#mode === 'registered';
            const notLeader = this.#notLeader;
            this.#onClosed(connection, describeCloseReason(reason), registered);
            if (notLeader !== null) {
              resolve({ kind: 'notLeader', leader: notLeader.leader, error: reason });
            } else if (registered) {
              resolve({ kind: 'served', value: undefined });
            } else {
              resolve({ kind: 'failed', error: reason });
            }
          },
        },
        // Results that several task threads hand back in one turn leave together.
        { coalesce: 'turn' },
      );
      this.#connection = connection;
      this.#unreachable = false;
      this.#notLeader = null;
      this.#setMode('registering');
      this.#log.info({ coordinator: this.coordinator }, 'connected');
      this.#features = new Set();
      this.#host.onConnected();
      connection.send({
        type: 'WORKER_REGISTER',
        workerId: this.#options.workerId,
        ...this.#host.registration(),
      });
      // A coordinator that accepts but never answers must not hold us forever.
      const timeoutMs = this.#connectTimeoutMs();
      connection.setIdleTimeout(timeoutMs, () =>
        this.#drop(connection, `no reply to WORKER_REGISTER within ${timeoutMs} ms`),
      );
    });
  }

  #drop(connection: FramedConnection, reason: string): void {
    void connection.destroy(reason);
  }

  #onClosed(connection: FramedConnection, reason: string, registered: boolean): void {
    if (connection !== this.#connection) return;
    this.#connection = null;
    this.#heartbeat.stop();
    this.#watchdog.stop();
    if (!this.closed) this.#setMode('disconnected');
    this.#host.onDisconnected(connection, reason, registered);
  }

  #onMessage(connection: FramedConnection, msg: Message): void {
    if (connection !== this.#connection) return;
    this.#watchdog.heard();
    if (!isCoordinatorToWorker(msg)) {
      this.#drop(connection, `unexpected ${msg.type} from coordinator`);
      return;
    }
    if (isCallReply(msg)) {
      if (this.registered) this.#onCallReply(connection, msg);
      else this.#drop(connection, `${msg.type} before WORKER_REGISTERED`);
      return;
    }
    switch (msg.type) {
      case 'WORKER_REGISTERED':
        this.#onRegistered(connection, msg);
        return;
      case 'TASK_ASSIGN':
        if (this.registered) this.#host.onAssign(connection, msg);
        else this.#drop(connection, 'TASK_ASSIGN before WORKER_REGISTERED');
        return;
      case 'TASK_ASSIGNS':
        if (!this.registered) {
          this.#drop(connection, 'TASK_ASSIGNS before WORKER_REGISTERED');
          return;
        }
        // Each as if it had come alone; a connection ended on the way ends the rest.
        for (const assign of msg.attempts) {
          if (!connection.isOpen) return;
          this.#host.onAssign(connection, assign);
        }
        return;
      case 'TASK_CANCEL':
        if (this.registered) this.#host.onCancel(msg);
        else this.#drop(connection, 'TASK_CANCEL before WORKER_REGISTERED');
        return;
      case 'ERROR':
        this.#onError(connection, msg);
        return;
      case 'HEARTBEAT_ACK':
        return; // heard: that is all it says
    }
  }

  #onRegistered(connection: FramedConnection, msg: WorkerRegistered): void {
    if (this.#mode !== 'registering') {
      this.#drop(connection, 'unexpected WORKER_REGISTERED from coordinator');
      return;
    }
    if (msg.workerId !== this.#options.workerId) {
      this.#log.warn({ registeredAs: msg.workerId }, 'coordinator echoed another workerId');
    }
    this.#setMode('registered');
    this.#follower.served();
    this.#features = parseFeatures(msg.features);
    const queues = this.#options.queues;
    if (queues !== undefined && queues !== null && !this.#features.has('queues')) {
      // It would ignore the list and hand us every queue's attempts.
      this.refuse(
        LocalErrorCode.UnsupportedFeature,
        `this coordinator does not support queues (--queues ${queues.join(',')} needs one that offers them)`,
      );
      return;
    }
    // The coordinator sends nothing while it has no work: silence is normal now.
    connection.setIdleTimeout(0, () => undefined);
    // Our results of one turn leave in TASK_RESULTS where the coordinator takes them.
    if (this.#features.has('batches')) {
      connection.batchMessages(resultBatch(this.#options.workerId));
    }
    this.#heartbeat.start();
    if (this.#features.has('heartbeatAck')) this.#watchdog.start();
    this.#host.onRegistered(connection, this.#features);
  }

  /** The answer to a call: back to the handler that made it (an unknown requestId is ignored). */
  #onCallReply(connection: FramedConnection, msg: CallReply): void {
    const reply = JSON.parse(messageToJson(msg)) as JsonObject;
    if (!this.#host.onCallAnswer(connection, msg.requestId, { ok: true, reply })) {
      this.#log.debug({ type: msg.type, requestId: msg.requestId }, 'answer to no open call');
    }
  }

  #onError(connection: FramedConnection, msg: ErrorMessage): void {
    if (this.registered && msg.requestId !== undefined && msg.requestId !== null) {
      // A refused call: that call fails, the session goes on.
      const outcome = {
        ok: false,
        code: msg.code ?? LocalErrorCode.RemoteError,
        message: msg.message,
      } as const;
      if (!this.#host.onCallAnswer(connection, msg.requestId, outcome)) {
        this.#log.debug({ code: msg.code, requestId: msg.requestId }, 'refusal of no open call');
      }
      return;
    }
    if (this.#mode === 'registering' && isClientPortAnswer(msg)) {
      // Registering with a client port is a configuration error, not a lost connection.
      this.refuse(WRONG_PORT_CODE, workerOnClientPortMessage(this.#follower.current.port));
      return;
    }
    if (isRefusal(msg.code)) {
      this.refuse(msg.code, clipError(msg.message));
      return;
    }
    if (msg.code === ErrorCode.NotLeader) {
      // A sharded coordinator's public port: the host opens sessions with its shards.
      const shards = msg.shards ?? null;
      if (shards !== null && shards.length > 0) {
        this.#log.info(
          { coordinator: this.coordinator, shards: shards.length },
          'the coordinator is sharded: registering with its shards instead',
        );
        this.#host.onShardMap(shards);
        if (this.closed) return; // the host closed it: no next coordinator to try
      }
      // A standby (or a leader that just stepped down): on to the leader it names.
      this.#notLeader = { leader: msg.leader ?? null };
      this.#log.info(
        { coordinator: this.coordinator, leader: msg.leader ?? 'unknown' },
        'not the leader; trying the next coordinator',
      );
      this.#drop(connection, 'coordinator is not the leader');
      return;
    }
    const what = this.registered ? 'error from coordinator' : 'registration refused';
    // A peer's text goes into the log cut, as a handler's error does.
    const message = clipError(msg.message);
    this.#log.error({ message, code: msg.code ?? undefined }, what);
    this.#drop(connection, `coordinator replied ERROR: ${message}`);
  }

  #sendHeartbeat(): void {
    if (!this.registered) return;
    this.#connection?.send({ type: 'HEARTBEAT', workerId: this.#options.workerId });
  }
}
