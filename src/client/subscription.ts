/**
 * Job events for a client: one SUBSCRIBE_JOBS on a connection of its own
 * (never on the connection that carries the client's requests: a v1
 * coordinator closes a connection after a request it does not understand),
 * read as an async iterable.
 *
 * - Pushed events are queued here until the consumer takes them; beyond
 *   {@link MAX_QUEUED_EVENTS} unread, further ones are dropped and reported
 *   as a gap, so a consumer that stops iterating holds bounded memory. The
 *   coordinator bounds its side the same way and says so with EVENTS_MISSED.
 * - When the connection ends (the coordinator restarted, stepped down or
 *   failed over), the subscription dials again, following the leader, and
 *   subscribes again; the changes made meanwhile were not seen, which is
 *   reported as a gap (`missed: null`: unknown).
 * - A coordinator that does not understand SUBSCRIBE_JOBS makes the first
 *   step fail with {@link EventsUnsupportedError}.
 */
import { ErrorCode } from '../protocol/error-codes.js';
import { isNotUnderstood } from '../protocol/features.js';
import { KNOWN_STATES } from '../protocol/job-view.js';
import type { JobEvent, JobEventFilter } from '../protocol/messages.js';
import type { ClientConnection, PushMessage } from './connection.js';
import { ClientClosedError, EventsUnsupportedError, RemoteError } from './errors.js';
import { LeaderConnection, type LeaderConnectionOptions } from './leader-connection.js';

/** Events queued in the client for a consumer that has not taken them. */
export const MAX_QUEUED_EVENTS = 10_000;
/** Pause before dialling again after a subscription's connection ended, in ms. */
const RECONNECT_PAUSE_MS = 100;

/** A stretch of events a subscriber did not see. */
export interface EventGap {
  /** `missed`: dropped because the reader fell behind; `reconnected`: the connection ended and was dialled again. */
  reason: 'missed' | 'reconnected';
  /** How many were dropped; null when not known (a reconnection). */
  missed: number | null;
}

type Item =
  | { kind: 'event'; msg: JobEvent }
  | { kind: 'gap'; gap: EventGap }
  | { kind: 'end'; err: Error | null };

export class Subscription implements AsyncIterable<JobEvent | EventGap> {
  readonly #options: LeaderConnectionOptions;
  readonly #filter: JobEventFilter;
  readonly #queue: Item[] = [];
  #wake: (() => void) | null = null;
  #leader: LeaderConnection | null = null;
  #closed = false;
  #dropped = 0;
  #resolveEnded!: () => void;
  readonly #ended = new Promise<void>((resolve) => (this.#resolveEnded = resolve));

  private constructor(options: LeaderConnectionOptions, filter: JobEventFilter) {
    this.#options = options;
    this.#filter = filter;
  }

  /** Subscribes (resolves once SUBSCRIBED arrived); throws EventsUnsupportedError or RemoteError. */
  static async open(
    options: LeaderConnectionOptions,
    filter: JobEventFilter,
  ): Promise<Subscription> {
    const sub = new Subscription(options, filter);
    await sub.#subscribe();
    return sub;
  }

  async #subscribe(): Promise<void> {
    const leader = await LeaderConnection.open(this.#options);
    if (this.#closed) {
      await leader.close();
      throw new ClientClosedError();
    }
    this.#leader = leader;
    let answer: { reply: Awaited<ReturnType<LeaderConnection['request']>>; conn: ClientConnection };
    try {
      answer = await leader.requestOn({
        type: 'SUBSCRIBE_JOBS',
        filter: this.#filter,
        knownStates: [...KNOWN_STATES],
      });
    } catch (err) {
      await leader.close();
      throw err;
    }
    const { reply, conn } = answer;
    if (reply.type === 'ERROR') {
      await leader.close();
      if (isNotUnderstood(reply) && reply.code !== ErrorCode.InvalidRequest) {
        throw new EventsUnsupportedError();
      }
      throw new RemoteError(reply);
    }
    conn.attach({
      push: (msg) => this.#onPush(msg),
      closed: () => {
        if (this.#leader === leader) void this.#reconnect();
      },
    });
  }

  #onPush(msg: PushMessage): void {
    if (msg.type === 'EVENTS_MISSED') {
      this.#enqueue({ kind: 'gap', gap: { reason: 'missed', missed: msg.missed } });
      return;
    }
    if (this.#queue.length >= MAX_QUEUED_EVENTS) {
      this.#dropped++;
      return;
    }
    if (this.#dropped > 0) {
      this.#queue.push({ kind: 'gap', gap: { reason: 'missed', missed: this.#dropped } });
      this.#dropped = 0;
    }
    this.#enqueue({ kind: 'event', msg });
  }

  async #reconnect(): Promise<void> {
    const old = this.#leader;
    this.#leader = null;
    void old?.close();
    while (!this.#closed) {
      await new Promise((resolve) => setTimeout(resolve, RECONNECT_PAUSE_MS));
      if (this.#closed) return;
      try {
        await this.#subscribe();
        this.#enqueue({ kind: 'gap', gap: { reason: 'reconnected', missed: null } });
        return;
      } catch (err) {
        // Gone for good (no longer supported, refused): end the iteration with it.
        if (err instanceof EventsUnsupportedError || err instanceof RemoteError) {
          this.#enqueue({ kind: 'end', err });
          return;
        }
      }
    }
  }

  #enqueue(item: Item): void {
    this.#queue.push(item);
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }

  /** Resolves once the subscription was closed. */
  get ended(): Promise<void> {
    return this.#ended;
  }

  /** Ends the subscription (the iteration finishes). Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#resolveEnded();
    this.#enqueue({ kind: 'end', err: null });
    const leader = this.#leader;
    this.#leader = null;
    await leader?.close();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<JobEvent | EventGap> {
    try {
      for (;;) {
        const item = this.#queue.shift();
        if (item === undefined) {
          await new Promise<void>((resolve) => (this.#wake = resolve));
          continue;
        }
        if (item.kind === 'end') {
          if (item.err !== null) throw item.err;
          return;
        }
        yield item.kind === 'event' ? item.msg : item.gap;
      }
    } finally {
      await this.close();
    }
  }
}
