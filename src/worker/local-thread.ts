/**
 * Handlers given in code (`startWorker({ handlers })`) run on the program's
 * own event loop, beside its database pools and clients, as BullMQ's
 * in-process processors and Temporal's activities do. The pool reaches them
 * as it reaches a task thread, through a message channel whose other end is
 * served on this thread ({@link LocalEndpoint}), so one set of rules covers
 * both: placement, stops, calls, batches.
 *
 * The price, and why it is opt-in: such a handler shares the thread that
 * carries the worker's connection and heartbeats. A handler that computes
 * without yielding delays the heartbeats (the coordinator may declare the
 * worker lost), and it cannot be preempted: a stop fires its signal, and one
 * that ignores it is let go (it runs on, unreported) instead of ending a
 * thread. {@link LoopWatch} logs each spell in which the loop was held.
 */
import { EventEmitter } from 'node:events';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { serveAttempts } from './attempt-server.js';
import type { Handler } from './task-modules.js';

/** The pool's end of the channel to the handlers served on this thread. */
export class LocalEndpoint extends EventEmitter {
  readonly #port: MessagePort;
  readonly #served: MessagePort;
  #ended = false;

  constructor(handlers: ReadonlyMap<string, Handler>, shared: SharedArrayBuffer) {
    super();
    const { port1, port2 } = new MessageChannel();
    this.#port = port1;
    this.#served = port2;
    port1.on('message', (value: unknown) => this.emit('message', value));
    serveAttempts(port2, Promise.resolve(new Map(handlers)), {
      shared,
      isolated: false,
      sampleMemory: false,
    });
    // The attempts' own work keeps the process alive, not the channel.
    port1.unref();
    port2.unref();
  }

  postMessage(value: unknown): void {
    if (!this.#ended) this.#port.postMessage(value);
  }

  /** Closes the channel: what the handlers still do is heard no more. */
  terminate(): Promise<number> {
    if (!this.#ended) {
      this.#ended = true;
      this.#port.close();
      this.#served.close();
      setImmediate(() => this.emit('exit', 0));
    }
    return Promise.resolve(0);
  }
}

/** A spell in which this thread's event loop was held. */
export interface HeldLoop {
  readonly heldMs: number;
}

/** How often the loop's turns are looked at, in ms. */
const WATCH_INTERVAL_MS = 100;

/**
 * Tells when the event loop of this thread was held for at least
 * `reportAfterMs` (a timer that fires late by that much), once per spell.
 */
export class LoopWatch {
  readonly #reportAfterMs: number;
  readonly #onHeld: (held: HeldLoop) => void;
  #timer: NodeJS.Timeout | null = null;
  #lastMs = 0;

  constructor(reportAfterMs: number, onHeld: (held: HeldLoop) => void) {
    this.#reportAfterMs = reportAfterMs;
    this.#onHeld = onHeld;
  }

  get watching(): boolean {
    return this.#timer !== null;
  }

  start(): void {
    if (this.#timer !== null) return;
    this.#lastMs = performance.now();
    this.#timer = setInterval(() => {
      const nowMs = performance.now();
      const lateMs = nowMs - this.#lastMs - WATCH_INTERVAL_MS;
      this.#lastMs = nowMs;
      if (lateMs >= this.#reportAfterMs) this.#onHeld({ heldMs: Math.round(lateMs) });
    }, WATCH_INTERVAL_MS).unref();
  }

  stop(): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }
}
