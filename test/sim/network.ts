/**
 * The simulated network: a manual clock, a seeded id source, and connections.
 *
 * A connection is two in-order queues, like one TCP stream each way:
 * `toCoordinator` (frames the peer wrote and the coordinator has not read yet)
 * and, for workers, `toWorker` (frames the coordinator released and the worker
 * has not read yet). The simulation drains both at random moments, which is
 * how delay and cross-connection reordering arise while per-connection order
 * is kept. An `end` item is the coordinator's view of the connection closing;
 * it always comes after every frame that was written before it.
 */
import type {
  ClientReply,
  ClientRequest,
  CoordinatorToWorker,
  WorkerInput,
} from '../../src/protocol/messages.js';

/** Simulated time, in epoch milliseconds. Only the simulation moves it. */
export class SimClock {
  #nowMs: number;

  constructor(startMs: number) {
    this.#nowMs = startMs;
  }

  get nowMs(): number {
    return this.#nowMs;
  }

  advance(deltaMs: number): void {
    if (!Number.isSafeInteger(deltaMs) || deltaMs < 0) {
      throw new RangeError(`clock can only move forward by whole ms, got ${deltaMs}`);
    }
    this.#nowMs += deltaMs;
  }
}

/**
 * UUID-shaped ids from a counter. One source serves every coordinator
 * incarnation of a run, so ids never repeat across restarts (as random UUIDs
 * would not). With `freeTailDigits`, the counter leaves the last digits at
 * 0 for a shard's number to be written there (protocol/shards.ts): ids of
 * one source then stay unique whatever shard they name.
 */
export class IdSource {
  #next = 0;
  readonly #prefix: string;
  readonly #tail: string;

  constructor(seed: number, freeTailDigits = 0) {
    this.#prefix = (seed >>> 0).toString(16).padStart(8, '0');
    this.#tail = '0'.repeat(freeTailDigits);
  }

  next(): string {
    this.#next++;
    const counter = this.#next.toString(16).padStart(12 - this.#tail.length, '0');
    return `${this.#prefix}-0000-4000-8000-${counter}${this.#tail}`;
  }

  get issued(): number {
    return this.#next;
  }
}

/** What a simulated worker process gets from its connection. */
export interface WorkerPeer {
  onFrame(link: WorkerLink, msg: CoordinatorToWorker): void;
  /** The connection is gone (closed by the coordinator, or the coordinator died). */
  onClosed(link: WorkerLink): void;
}

/** What a simulated client gets from its connection. */
export interface ClientPeer {
  onReply(link: ClientLink, requestId: number, msg: ClientReply): void;
  onClosed(link: ClientLink): void;
}

export type WorkerInbound =
  /** `currentAtSend`: for TASK_RESULT, whether its lease was the job's current one when sent. */
  | { kind: 'frame'; msg: WorkerInput; currentAtSend: boolean; sentAtMs: number }
  /** The peer broke the protocol (an undecodable frame). */
  | { kind: 'violation'; reason: string }
  | { kind: 'end'; reason: string };

export class WorkerLink {
  readonly connId: number;
  /** The worker process reading this connection; null once it abandoned it. */
  owner: WorkerPeer | null;
  readonly toCoordinator: WorkerInbound[] = [];
  /** Frames on their way to the worker; `null` marks the close. */
  readonly toWorker: (CoordinatorToWorker | null)[] = [];
  /** False once nothing the peer writes can reach the coordinator any more. */
  writable = true;
  endQueued = false;
  /** The worker id of this connection's session (set when the core registers it). */
  registeredAs: string | null = null;
  /** The core closed this connection (its later frames must change nothing). */
  closedByCore = false;
  /** The shell told the core it has read this connection's end (`workerEnding`). */
  endTold = false;
  /** When the shell half-closed it (reading on until the worker closes too); null if not. */
  halfClosedAtMs: number | null = null;
  /** Leases released to this connection: a TASK_CANCEL must name one of them. */
  readonly leases = new Set<string>();
  /** The worker registered with `batches`: runs of assignments reach it in TASK_ASSIGNS. */
  takesBatches = false;

  constructor(connId: number, owner: WorkerPeer) {
    this.connId = connId;
    this.owner = owner;
  }

  /** Queues the coordinator's view of the end, once, after everything already written. */
  queueEnd(reason: string): void {
    this.writable = false;
    if (this.endQueued) return;
    this.endQueued = true;
    this.toCoordinator.push({ kind: 'end', reason });
  }
}

export type ClientInbound =
  { kind: 'request'; requestId: number; msg: ClientRequest } | { kind: 'end' };

export class ClientLink {
  readonly connId: number;
  /** The peer's address, as the shell hands it to the core with each request. */
  readonly address: string;
  owner: ClientPeer | null;
  readonly toCoordinator: ClientInbound[] = [];
  writable = true;
  /** The shell numbers requests per connection, from 0, in arrival order. */
  #nextRequestId = 0;

  constructor(connId: number, owner: ClientPeer, address: string) {
    this.connId = connId;
    this.owner = owner;
    this.address = address;
  }

  /** Writes a request; returns its request id, or null when the link is closed. */
  request(msg: ClientRequest): number | null {
    if (!this.writable) return null;
    const requestId = this.#nextRequestId++;
    this.toCoordinator.push({ kind: 'request', requestId, msg });
    return requestId;
  }

  /**
   * The client hangs up. Requests it wrote may still be read (the first
   * `keepQueued`); the rest die with the socket. Replies go nowhere from now.
   */
  hangUp(keepQueued: number): void {
    if (!this.writable) return;
    this.writable = false;
    this.owner = null;
    this.toCoordinator.length = Math.min(this.toCoordinator.length, keepQueued);
    this.toCoordinator.push({ kind: 'end' });
  }

  /**
   * The core closed the connection: the shell reads nothing more of it (what
   * was queued is dropped), the client sees the close, and the shell tells
   * the core the connection ended.
   */
  closeByCoordinator(): void {
    if (!this.writable) return;
    this.writable = false;
    const owner = this.owner;
    this.owner = null;
    this.toCoordinator.length = 0;
    this.toCoordinator.push({ kind: 'end' });
    owner?.onClosed(this);
  }
}
