/**
 * The coordinator's two ports and its in-process entrance: accepting
 * connections, gating every frame, and delivering what the current term
 * releases.
 *
 * Gating depends on what stands behind the ports right now
 * ({@link PortsHost.entrance}):
 * - `notLeader`: a standby (or a coordinator whose term is starting) answers
 *   every client request, AUTH included, and every registration with
 *   NOT_LEADER, naming the leader when it knows it;
 * - `failed`: every client request is answered with the failure at once and
 *   workers are not accepted;
 * - `term`: client requests and worker frames become inputs of that term;
 *   replies the shell makes itself (a bad value, a malformed frame, a bound
 *   that bit) queue behind the core's, so a connection's replies stay in order;
 * - `router`: a sharded coordinator's own ports: client requests go to its
 *   {@link RequestRouter}, which answers each (forwarded to the shards) with
 *   {@link Ports.reply} and {@link Ports.push}; workers are sent to the
 *   shards (LIST_SHARDS answered, WORKER_REGISTER refused with the map);
 * - `closed`: nothing serves (not started yet, or start-up failed).
 * While the host is holding (before the first serve, while a term starts),
 * new sockets wait, paused, and are let in by {@link Ports.admitHeld}.
 *
 * Worker tokens are checked here and go no further: the core never sees one.
 */
import type { Socket } from 'node:net';
import type { Admission } from '../../net/admission.js';
import { FramedConnection, describeCloseReason } from '../../net/framed-connection.js';
import { ASSIGN_BATCH } from '../../net/frame-batch.js';
import { CLIENT_PORT_HINT, WORKER_PORT_HINT } from '../../net/port-kind.js';
import { TcpServer } from '../../net/tcp.js';
import type { Logger } from '../../observability/logger.js';
import { ErrorCode, ProtocolErrorCode } from '../../protocol/error-codes.js';
import type { ProtocolError } from '../../protocol/errors.js';
import {
  isClientRequest,
  isWorkerToCoordinator,
  type ClientReply,
  type ClientRequest,
  type CoordinatorToWorker,
  type ErrorMessage,
  type JobEvent,
  type JobEventKind,
  type Message,
} from '../../protocol/messages.js';
import { notLeaderError } from '../leadership/not-leader.js';
import type { Failure, Term } from '../term/term.js';
import type { ClientInput, WorkerInput } from '../term/worker-inbox.js';
import { ClientSession } from './client-session.js';
import { Guard, type NetLimits, type SecurityOptions } from './guard.js';
import { LOCAL_CONN_ID, LocalClient } from './local-client.js';

export type PortKind = 'worker' | 'client';

/** What stands behind the ports right now. */
export type Entrance =
  | { readonly kind: 'notLeader' }
  | { readonly kind: 'failed'; readonly failure: Failure }
  | { readonly kind: 'term'; readonly term: Term }
  | { readonly kind: 'router'; readonly router: RequestRouter }
  | { readonly kind: 'closed' };

/** What stands behind a sharded coordinator's own ports (sharding/shard-router.ts). */
export interface RequestRouter {
  /** One client request, answered later through the ports (reply, push), in request order. */
  request(connId: number, requestId: number, msg: ClientRequest): void;
  /** A client connection ended. */
  closed(connId: number): void;
  /** The answer to LIST_SHARDS. */
  shardList(): ClientReply;
  /** The refusal of a WORKER_REGISTER: register with the shards instead. */
  workerRefusal(): ErrorMessage;
}

/** What the ports ask of the coordinator. */
export interface PortsHost {
  /** New connections wait (paused) while this is true. */
  holding(): boolean;
  /** False once workers are turned away (failed, or shutting down). */
  acceptsWorkers(): boolean;
  entrance(): Entrance;
  /** The leader's address for a port kind, when known (for NOT_LEADER). */
  leaderAddress(port: PortKind): string | null;
  /** A client's input for the current term, if one takes inputs (through its inbox). */
  clientInput(input: ClientInput): void;
  /** A worker connection's input for the current term (through its inbox). */
  workerInput(input: WorkerInput): void;
  /** A client connection ended. */
  clientClosed(connId: number): void;
  /**
   * The shell's own answer to a request, or null to hand it to the term: a
   * refusal of another shard's request, or what the core cannot know
   * (LIST_SHARDS).
   */
  shellAnswer(msg: ClientRequest): ClientReply | null;
}

export interface PortsOptions {
  security: SecurityOptions;
  netLimits: Partial<NetLimits>;
  heartbeatTimeoutMs: number;
  logger: Logger;
  /** In-process requests open at once (default DEFAULT_MAX_LOCAL_IN_FLIGHT). */
  maxLocalInFlight?: number;
}

/** How long shutdown waits for connections to close gracefully, in ms. */
const CLOSE_GRACE_MS = 2_000;

export class Ports {
  readonly guard: Guard;
  /** Requests from inside the process (the HTTP API), through the core like any client's. */
  readonly local: LocalClient;
  readonly #host: PortsHost;
  readonly #workerServer: TcpServer;
  readonly #clientServer: TcpServer;
  readonly #workers = new Map<number, FramedConnection>();
  /** Admissions of worker connections not yet registered. */
  readonly #workerAdmissions = new Map<number, Admission>();
  readonly #clients = new Map<number, ClientSession>();
  readonly #pushed: Record<JobEventKind, number> = { state: 0, progress: 0 };
  /** Sockets accepted while holding; served once let in. */
  #held: { socket: Socket; port: PortKind; admission: Admission }[] = [];
  #bound: [number, number] = [0, 0];

  /** Reads certificates and token files first: a mistake there stops the start before the database is touched. */
  constructor(host: PortsHost, options: PortsOptions) {
    this.#host = host;
    this.guard = new Guard(
      options.security,
      options.netLimits,
      options.heartbeatTimeoutMs,
      options.logger,
    );
    this.#workerServer = new TcpServer(
      (socket, admission) => this.#accept(socket, 'worker', admission),
      this.guard.serverOptions('worker'),
    );
    this.#clientServer = new TcpServer(
      (socket, admission) => this.#accept(socket, 'client', admission),
      this.guard.serverOptions('client'),
    );
    this.local = new LocalClient(
      (requestId, msg) =>
        host.clientInput({ kind: 'clientRequest', connId: LOCAL_CONN_ID, requestId, msg }),
      options.maxLocalInFlight,
    );
  }

  /** Binds both ports (worker first); resolves with the ports actually bound. */
  async bind(workerPort: number, clientPort: number, host: string): Promise<void> {
    this.#bound = [
      await this.#workerServer.listen(workerPort, host),
      await this.#clientServer.listen(clientPort, host),
    ];
  }

  get workerPort(): number {
    return this.#bound[0];
  }

  get clientPort(): number {
    return this.#bound[1];
  }

  /** Open connections per port right now: all, and those not yet through TLS/AUTH/registration. */
  connectionCounts(): Record<PortKind, { open: number; pending: number }> {
    const count = (server: TcpServer) => ({
      open: server.connectionCount,
      pending: server.pendingCount,
    });
    return { worker: count(this.#workerServer), client: count(this.#clientServer) };
  }

  /** Lets the connections that waited in (served, or told NOT_LEADER). */
  admitHeld(): void {
    const held = this.#held;
    this.#held = [];
    for (const { socket, port, admission } of held) {
      socket.resume();
      this.#accept(socket, port, admission);
    }
  }

  // What a term releases.

  /** A frame to a worker; WORKER_REGISTERED ends its admission's handshake. */
  send(connId: number, msg: CoordinatorToWorker): void {
    const conn = this.#workers.get(connId);
    if (msg.type === 'WORKER_REGISTERED') {
      this.#workerAdmissions.get(connId)?.establish();
      this.#workerAdmissions.delete(connId);
      conn?.setInboundClass('worker');
    }
    conn?.send(msg);
  }

  reply(connId: number, requestId: number, msg: ClientReply): void {
    if (connId === LOCAL_CONN_ID) this.local.deliver(requestId, msg);
    else this.#clients.get(connId)?.deliver(requestId, msg);
  }

  staged(connId: number, requestId: number, msg: ClientReply): void {
    this.#clients.get(connId)?.staged(requestId, msg);
  }

  /** One job event to each of its subscribers' connections (gone ones are skipped). */
  push(connIds: readonly number[], msg: JobEvent): void {
    const clients = this.#clients;
    for (const connId of connIds) clients.get(connId)?.push(msg);
    this.#pushed[msg.event] += connIds.length;
  }

  /** Job events handed to subscriptions so far, one per subscription, by kind (for metrics). */
  get pushedEvents(): Readonly<Record<JobEventKind, number>> {
    return this.#pushed;
  }

  held(connId: number, requestId: number): void {
    this.#clients.get(connId)?.held(requestId);
  }

  close(connId: number, reason: string, abrupt = false): void {
    // A worker connection keeps delivering until the worker closes too, so a
    // late result on its way is still judged (and rejected as stale).
    const worker = this.#workers.get(connId);
    if (worker !== undefined) void worker.close(reason, { drainInbound: true });
    else if (abrupt) void this.#clients.get(connId)?.conn.destroy(reason);
    else void this.#clients.get(connId)?.conn.close(reason);
  }

  hasClient(connId: number): boolean {
    return connId === LOCAL_CONN_ID || this.#clients.has(connId);
  }

  // Whole-port moves.

  /** Answers every open client request, in-process ones included, with `reply` (fail-stop). */
  answerAll(reply: ClientReply): void {
    for (const session of this.#clients.values()) session.answerAll(reply);
    this.local.answerAll(reply);
  }

  destroyWorkers(reason: string): void {
    for (const conn of this.#workers.values()) void conn.destroy(reason);
  }

  /** Drops every connection at once (a request in flight gets no answer). */
  dropAll(reason: string): void {
    this.destroyWorkers(reason);
    for (const session of this.#clients.values()) void session.conn.destroy(reason);
  }

  stopAccepting(): void {
    this.#workerServer.stopAccepting();
    this.#clientServer.stopAccepting();
  }

  /** Closes every connection, waiting at most {@link CLOSE_GRACE_MS} for them to close gracefully. */
  async closeConnections(): Promise<void> {
    for (const { socket } of this.#held) socket.destroy();
    this.#held = [];
    const conns = [...this.#workers.values(), ...[...this.#clients.values()].map((c) => c.conn)];
    await Promise.race([
      Promise.all(conns.map((conn) => conn.close('coordinator shutting down'))),
      new Promise((resolve) => setTimeout(resolve, CLOSE_GRACE_MS).unref()),
    ]);
  }

  /** Closes both servers (after {@link stopAccepting} and {@link closeConnections}). */
  async closeServers(): Promise<void> {
    await Promise.all([this.#workerServer.close(), this.#clientServer.close()]);
  }

  // Accepting.

  #accept(socket: Socket, port: PortKind, admission: Admission): void {
    if (this.#host.holding()) {
      socket.pause();
      this.#held.push({ socket, port, admission });
      return;
    }
    if (port === 'worker') this.#acceptWorker(socket, admission);
    else this.#acceptClient(socket, admission);
  }

  #acceptWorker(socket: Socket, admission: Admission): void {
    const host = this.#host;
    const conn: FramedConnection = new FramedConnection(
      socket,
      {
        onMessage: (msg) => this.#onWorkerMessage(conn, msg),
        onProtocolError: (err) =>
          host.workerInput({ kind: 'workerViolation', connId: conn.id, reason: err.message }),
        onLimit: (breach) => {
          this.#reportLimit(conn, 'worker', breach.limit);
          host.workerInput({ kind: 'workerViolation', connId: conn.id, reason: breach.message });
        },
        onClose: (reason) => {
          this.#workers.delete(conn.id);
          this.#workerAdmissions.delete(conn.id);
          host.workerInput({
            kind: 'workerClosed',
            connId: conn.id,
            reason: describeCloseReason(reason),
          });
        },
      },
      this.guard.connectionOptions('worker'),
    );
    if (!host.acceptsWorkers()) {
      void conn.destroy('coordinator is not accepting workers');
      return;
    }
    this.#workers.set(conn.id, conn);
    this.#workerAdmissions.set(conn.id, admission);
    // Absolute: a peer trickling bytes does not extend it.
    const timeoutMs = this.guard.limits.handshakeTimeoutMs;
    admission.setOnExpired((cause) => {
      host.workerInput({
        kind: 'workerViolation',
        connId: conn.id,
        reason:
          cause === 'deadline'
            ? `no WORKER_REGISTER within ${timeoutMs} ms`
            : 'dropped before WORKER_REGISTER to make room for a newer connection',
      });
    });
  }

  #acceptClient(socket: Socket, admission: Admission): void {
    const conn: FramedConnection = new FramedConnection(
      socket,
      {
        onMessage: (msg) => this.#onClientMessage(session, msg),
        onProtocolError: (err) => this.#onClientProtocolError(session, err),
        onLimit: (breach) => {
          this.#reportLimit(conn, 'client', breach.limit);
          this.#onClientLimit(session, breach.message);
        },
        onClose: () => {
          this.#clients.delete(conn.id);
          this.#host.clientClosed(conn.id);
        },
      },
      this.guard.connectionOptions('client'),
    );
    const { access, limits } = this.guard;
    const session = new ClientSession(conn, {
      checkToken: access.clientTokensRequired ? (token) => access.allowsClient(token) : null,
      admission,
      maxUnsentReplyBytes: limits.maxUnsentReplyBytes,
      idleTimeoutMs: limits.clientIdleTimeoutMs,
      report: (event) => this.guard.report(event),
      onBlockedByWait: () => this.#host.clientInput({ kind: 'releaseWaits', connId: conn.id }),
      address: admission.address,
      onSubscriberStalled: (stalled) =>
        this.#host.clientInput({ kind: 'subscriberStalled', connId: conn.id, stalled }),
    });
    this.#clients.set(conn.id, session);
  }

  #reportLimit(conn: FramedConnection, port: PortKind, limit: 'frame_timeout'): void {
    this.guard.report({ type: 'connection.limited', port, limit, remote: conn.remote });
  }

  #notLeader(port: PortKind): ErrorMessage {
    return notLeaderError(port, this.#host.leaderAddress(port));
  }

  // Gating the client port.

  #onClientMessage(session: ClientSession, msg: Message): void {
    const entrance = this.#host.entrance();
    // A standby answers NOT_LEADER to everything, AUTH included, before any token check.
    if (entrance.kind === 'notLeader') {
      session.deliver(session.nextRequest(), this.#notLeader('client'));
      return;
    }
    if (session.gate(msg)) return;
    const requestId = session.nextRequest(msg);
    const connId = session.conn.id;
    if (entrance.kind === 'router') {
      if (isClientRequest(msg)) entrance.router.request(connId, requestId, msg);
      else session.deliver(requestId, notAClientRequest(msg));
      return;
    }
    if (entrance.kind !== 'term') {
      session.deliver(requestId, replyWithout(entrance));
    } else if (!isClientRequest(msg)) {
      entrance.term.replyLater(connId, requestId, notAClientRequest(msg));
    } else {
      const answer = this.#host.shellAnswer(msg);
      if (answer !== null) {
        entrance.term.replyLater(connId, requestId, answer);
        return;
      }
      const address = session.address;
      this.#host.clientInput({
        kind: 'clientRequest',
        connId,
        requestId,
        msg,
        ...(address !== null && { address }),
      });
    }
  }

  #onClientProtocolError(session: ClientSession, err: ProtocolError): 'continue' | undefined {
    const entrance = this.#host.entrance();
    const badValue = err.code === ProtocolErrorCode.BadValue;
    if (entrance.kind === 'notLeader' && badValue) {
      session.deliver(session.nextRequest(), this.#notLeader('client'));
      return 'continue';
    }
    if (session.refuseUnlessOpen()) return undefined;
    const requestId = session.nextRequest();
    const connId = session.conn.id;
    if (badValue && (entrance.kind === 'term' || entrance.kind === 'router')) {
      // The frame was readable; only a value was wrong. Answer it like any
      // other invalid request and keep the connection.
      const invalid: ErrorMessage = {
        type: 'ERROR',
        code: ErrorCode.InvalidRequest,
        message: `Invalid request: ${err.message}`,
      };
      if (entrance.kind === 'term') entrance.term.replyLater(connId, requestId, invalid);
      else session.deliver(requestId, invalid);
      return 'continue';
    }
    // After a framing error the byte stream is lost; after a bad frame the
    // peer is not speaking the protocol. Either way the connection ends here.
    this.#lastWord(session, requestId, entrance, {
      reply: {
        type: 'ERROR',
        code: ErrorCode.MalformedRequest,
        message: `Malformed request: ${err.message}`,
      },
      reason: `malformed request: ${err.message}`,
    });
    return undefined;
  }

  /** A frame took too long or memory ran short: a last ERROR in order, then close. */
  #onClientLimit(session: ClientSession, message: string): void {
    if (session.refuseUnlessOpen()) return;
    const requestId = session.nextRequest();
    this.#lastWord(session, requestId, this.#host.entrance(), {
      reply: {
        type: 'ERROR',
        code: ErrorCode.LimitExceeded,
        message: `Limit exceeded: ${message}`,
      },
      reason: message,
    });
  }

  /** A last reply and a close: behind the term's replies when one serves, else at once. */
  #lastWord(
    session: ClientSession,
    requestId: number,
    entrance: Entrance,
    last: { reply: ErrorMessage; reason: string },
  ): void {
    if (entrance.kind !== 'term') {
      session.deliver(requestId, last.reply);
      void session.conn.close(last.reason);
      return;
    }
    entrance.term.replyLater(session.conn.id, requestId, last.reply);
    entrance.term.closeLater(session.conn.id, last.reason);
  }

  // Gating the worker port.

  #onWorkerMessage(conn: FramedConnection, msg: Message): void {
    const entrance = this.#host.entrance();
    if (entrance.kind === 'router') {
      this.#routeWorker(conn, msg, entrance.router);
      return;
    }
    if (entrance.kind === 'notLeader') {
      conn.pause();
      conn.send(this.#notLeader('worker'));
      void conn.close('not the leader');
      return;
    }
    const host = this.#host;
    if (!isWorkerToCoordinator(msg)) {
      const hint = isClientRequest(msg) ? ` (a client request: ${WORKER_PORT_HINT})` : '';
      host.workerInput({
        kind: 'workerViolation',
        connId: conn.id,
        reason: `unexpected ${msg.type}${hint}`,
      });
      return;
    }
    if (msg.type === 'WORKER_REGISTER' && this.#workerAdmissions.get(conn.id)?.pending === true) {
      // The token is checked here and goes no further: the core never sees it.
      const { authToken, ...register } = msg;
      if (!this.guard.access.allowsWorker(authToken)) {
        if (authToken == null) {
          this.#refuseWorker(
            conn,
            'no authToken',
            'Unauthenticated: this coordinator needs a worker token (WORKER_REGISTER carried no authToken)',
          );
        } else this.#refuseWorker(conn, 'token refused', 'Unauthenticated: worker token refused');
        return;
      }
      // A worker that takes batches gets a turn's assignments in TASK_ASSIGNS
      // (framing only: the core still sends each TASK_ASSIGN on its own).
      if (register.batches === true) conn.batchMessages(ASSIGN_BATCH);
      host.workerInput({ kind: 'workerMessage', connId: conn.id, msg: register });
      return;
    }
    if (msg.type === 'TASK_RESULTS') {
      // Framing only: the core takes each result as if it had come alone
      // (and checks each against the session).
      for (const result of msg.results) {
        host.workerInput({ kind: 'workerMessage', connId: conn.id, msg: result });
      }
      return;
    }
    host.workerInput({ kind: 'workerMessage', connId: conn.id, msg });
  }

  /**
   * A sharded coordinator's own worker port: LIST_SHARDS is answered (the
   * connection stays), a registration is refused with the map of shards, and
   * anything else ends the connection.
   */
  #routeWorker(conn: FramedConnection, msg: Message, router: RequestRouter): void {
    // Where the shards take workers is for workers with a valid token only.
    const token =
      msg.type === 'LIST_SHARDS' || msg.type === 'WORKER_REGISTER' ? msg.authToken : null;
    if (!this.guard.access.allowsWorker(token)) {
      const reason = token == null ? 'no authToken' : 'token refused';
      this.#refuseWorker(
        conn,
        reason,
        `Unauthenticated: worker token ${token == null ? 'missing' : 'refused'}`,
      );
      return;
    }
    if (msg.type === 'LIST_SHARDS') {
      conn.send(router.shardList());
      return;
    }
    conn.pause();
    if (msg.type === 'WORKER_REGISTER') {
      conn.send(router.workerRefusal());
      void conn.close('a sharded coordinator: the worker registers with its shards');
      return;
    }
    void conn.close(`unexpected ${msg.type} on a sharded coordinator's worker port`);
  }

  /** A registration without a valid token: ERROR UNAUTHENTICATED, then close. */
  #refuseWorker(conn: FramedConnection, reason: string, message: string): void {
    this.guard.report({ type: 'auth.refused', port: 'worker', remote: conn.remote, reason });
    conn.pause();
    conn.send({ type: 'ERROR', code: ErrorCode.Unauthenticated, message });
    void conn.close(`unauthenticated worker: ${reason}`);
  }
}

/** The answer to a frame on the client port that is no client request. */
function notAClientRequest(msg: Message): ErrorMessage {
  return {
    type: 'ERROR',
    code: ErrorCode.UnsupportedRequest,
    message: `Unsupported request: ${msg.type} is not a client request${
      isWorkerToCoordinator(msg) ? ` (${CLIENT_PORT_HINT})` : ''
    }`,
  };
}

/** The answer to a client request when no term serves it. */
function replyWithout(entrance: Exclude<Entrance, { kind: 'term' | 'router' }>): ErrorMessage {
  switch (entrance.kind) {
    case 'failed':
      return { type: 'ERROR', ...entrance.failure };
    case 'notLeader':
    case 'closed':
      return {
        type: 'ERROR',
        code: ErrorCode.InternalError,
        message: 'Coordinator is not running',
      };
  }
}
