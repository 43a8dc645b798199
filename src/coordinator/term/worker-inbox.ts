/**
 * What the connections said, handed to the core one poll later, with the
 * ends of worker connections known first; and the sweep's tick, after the
 * frames read with it.
 *
 * A socket delivers its buffered frames before its end: libuv stops reading
 * a socket after a short read and picks up its end-of-stream only in the next
 * turn of the event loop. A worker that wrote its last frames and closed (or
 * a dial it gave up on while the coordinator was frozen) is therefore read
 * as frames in one turn and as ended in the next. Handed over at once, the
 * core would register such a connection, or hand it the slot its last result
 * freed, before it learns that the connection is gone, and the attempt would
 * be lost without ever having left.
 *
 * So each input waits until its connection has been polled once more: inputs
 * are queued as they are read, and at every check phase (setImmediate) the
 * ones queued before the previous check phase are delivered. A worker
 * connection's end is announced to the core (`workerEnding`) the moment it is
 * read, so before the frames still queued ahead of it; they still count (a
 * result sent just before the close is accepted), but from then on nothing is
 * assigned there, whatever else the core handles meanwhile. Per connection
 * the order is kept; across connections it is the order of arrival. A tick
 * waits the same way and goes after the frames of its generation, so after a
 * stall of our own the heartbeats and results that queued up meanwhile are
 * seen before anyone is judged.
 *
 * Client requests wait the same poll and go in the same order of arrival.
 * Handed over at once while workers' results waited, a loaded coordinator
 * would serve every submission of a turn before the results read with it:
 * producers that only wait for their acknowledgement then out-run the
 * workers, whose every next assignment comes a turn later, and a queue of
 * seconds builds up (docs/MEASURED_BEHAVIOR.md, "The worker inbox and the
 * wide load"). One rule for every connection keeps the two in step.
 */
import type { CoreInput } from '../core/types.js';

export type WorkerInput = Extract<
  CoreInput,
  { kind: 'workerMessage' | 'workerViolation' | 'workerClosed' }
>;

/** What a client connection (or the in-process client) hands the core. */
export type ClientInput = Extract<
  CoreInput,
  { kind: 'clientRequest' | 'clientClosed' | 'releaseWaits' | 'subscriberStalled' }
>;

export type InboxInput = WorkerInput | ClientInput;

const isWorkerInput = (input: InboxInput): input is WorkerInput =>
  input.kind === 'workerMessage' ||
  input.kind === 'workerViolation' ||
  input.kind === 'workerClosed';

interface Generation {
  inputs: InboxInput[];
  tick: boolean;
}

const empty = (): Generation => ({ inputs: [], tick: false });

export class WorkerInbox {
  readonly #deliver: (input: CoreInput) => void;
  readonly #delivered: () => void;
  /** Read before the last check phase: delivered at the next one. */
  #older: Generation = empty();
  /** Read since the last check phase. */
  #newer: Generation = empty();
  /** Connections whose end is queued (in either generation). */
  #ending = new Set<number>();
  /** Of those, the ones the core was told about (`workerEnding`). */
  #announced = new Set<number>();
  #scheduled = false;

  /**
   * @param deliver hands one input to the core.
   * @param delivered told after each check phase that handed inputs over
   *   (the term closes its batch then, instead of one turn later).
   */
  constructor(deliver: (input: CoreInput) => void, delivered: () => void = () => undefined) {
    this.#deliver = deliver;
    this.#delivered = delivered;
  }

  /** Inputs (ticks included) not delivered yet. */
  get size(): number {
    const count = (g: Generation): number => g.inputs.length + (g.tick ? 1 : 0);
    return count(this.#older) + count(this.#newer);
  }

  push(input: InboxInput): void {
    this.#newer.inputs.push(input);
    if (input.kind === 'workerClosed') this.#endRead(input.connId);
    this.#schedule();
  }

  /** An end was read: the core hears of it at once (what it reads meanwhile must not go there). */
  #endRead(connId: number): void {
    this.#ending.add(connId);
    if (this.#announced.has(connId)) return;
    this.#announced.add(connId);
    this.#deliver({ kind: 'workerEnding', connId });
  }

  /** The sweep's period came: a tick, after the frames read in the same turn. */
  tick(): void {
    this.#newer.tick = true;
    this.#schedule();
  }

  /** Delivers everything queued now (at shutdown: nothing more will be read). */
  flushAll(): void {
    this.#deliverGeneration(this.#older);
    this.#deliverGeneration(this.#newer);
    this.clear();
  }

  /** Drops everything queued (the core it was meant for is gone). */
  clear(): void {
    this.#older = empty();
    this.#newer = empty();
    this.#ending = new Set();
    this.#announced = new Set();
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => this.#onCheck());
  }

  #onCheck(): void {
    this.#scheduled = false;
    const due = this.#older;
    this.#older = this.#newer;
    this.#newer = empty();
    this.#deliverGeneration(due);
    if (this.size > 0) this.#schedule();
    this.#delivered();
  }

  #deliverGeneration(generation: Generation): void {
    for (const input of generation.inputs) {
      if (!isWorkerInput(input)) {
        this.#deliver(input);
        continue;
      }
      const { connId } = input;
      if (this.#ending.has(connId) && !this.#announced.has(connId)) {
        this.#announced.add(connId);
        this.#deliver({ kind: 'workerEnding', connId });
      }
      if (input.kind === 'workerClosed') {
        this.#ending.delete(connId);
        this.#announced.delete(connId);
      }
      this.#deliver(input);
    }
    if (generation.tick) this.#deliver({ kind: 'tick' });
  }
}
