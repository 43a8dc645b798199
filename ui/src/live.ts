/**
 * The page's one live connection: an EventSource on /api/events (the
 * session cookie authorizes it). Components subscribe to its events; the
 * browser reconnects by itself after a drop, and the page shows the state.
 */
import type { JobsMessage } from '../../src/http/live.js';
import type { Overview, WorkersResult } from './api.js';

export interface LiveEvents {
  jobs: JobsMessage;
  overview: Overview;
  workers: WorkersResult;
  purged: { deleted: number };
}
export type LiveEventName = keyof LiveEvents;
export type LiveStatus = 'connecting' | 'live' | 'reconnecting';

type Listener<K extends LiveEventName> = (data: LiveEvents[K]) => void;

const NAMES: readonly LiveEventName[] = ['jobs', 'overview', 'workers', 'purged'];

class LiveFeed {
  #source: EventSource | null = null;
  readonly #listeners = new Map<LiveEventName, Set<Listener<never>>>();
  readonly #statusListeners = new Set<(status: LiveStatus) => void>();
  readonly #latest = new Map<LiveEventName, unknown>();
  status: LiveStatus = 'connecting';

  start(): void {
    if (this.#source !== null) return;
    const source = new EventSource('/api/events');
    this.#source = source;
    source.onopen = () => this.#setStatus('live');
    source.onerror = () => this.#setStatus('reconnecting');
    for (const name of NAMES) {
      source.addEventListener(name, (event) => {
        const data = JSON.parse((event as MessageEvent<string>).data) as unknown;
        this.#latest.set(name, data);
        for (const listener of this.#listeners.get(name) ?? []) listener(data as never);
      });
    }
  }

  stop(): void {
    this.#source?.close();
    this.#source = null;
    this.#setStatus('connecting');
  }

  /** The latest data of an event, if one arrived. */
  latest<K extends LiveEventName>(name: K): LiveEvents[K] | undefined {
    return this.#latest.get(name) as LiveEvents[K] | undefined;
  }

  on<K extends LiveEventName>(name: K, listener: Listener<K>): () => void {
    let set = this.#listeners.get(name);
    if (set === undefined) this.#listeners.set(name, (set = new Set()));
    // A listener of one event's data is kept with the others of that name.
    set.add(listener);
    return () => set.delete(listener);
  }

  onStatus(listener: (status: LiveStatus) => void): () => void {
    this.#statusListeners.add(listener);
    return () => this.#statusListeners.delete(listener);
  }

  #setStatus(status: LiveStatus): void {
    this.status = status;
    for (const listener of this.#statusListeners) listener(status);
  }
}

export const live = new LiveFeed();
