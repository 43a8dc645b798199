/**
 * Floods of an HTTP port from this process, for tests and the security
 * benchmark: `count` connections from one source address that are either
 * idle (connect, send nothing) or slowloris (send a request line and then
 * one header byte every `intervalMs`, never finishing the header). With
 * `reconnect`, each one the server closes is opened again at once, until
 * `stop()`. Bounded: at most `count` sockets at a time and `maxOpens` in all.
 */
import { connect, type Socket } from 'node:net';

export interface HttpFloodPlan {
  port: number;
  host?: string;
  localAddress?: string;
  mode: 'idle' | 'slowloris';
  count: number;
  reconnect?: boolean;
  /** Slowloris: time between header bytes (default 100 ms). */
  intervalMs?: number;
  /** Connections opened in all, reconnects included (default 100 × count). */
  maxOpens?: number;
}

export interface HttpFloodStats {
  opened: number;
  /** Closed by the server (or refused) while the flood ran. */
  closedByServer: number;
  /** Lifetimes of the connections the server closed, in ms. */
  lifetimesMs: number[];
  /** Connections open right now. */
  open: number;
}

export class HttpFlood {
  readonly #plan: HttpFloodPlan;
  readonly #sockets = new Set<Socket>();
  #stopped = false;
  readonly stats: HttpFloodStats = { opened: 0, closedByServer: 0, lifetimesMs: [], open: 0 };

  private constructor(plan: HttpFloodPlan) {
    this.#plan = plan;
  }

  /** Starts `count` connections (in batches, so the accept backlog keeps up). */
  static start(plan: HttpFloodPlan): HttpFlood {
    const flood = new HttpFlood(plan);
    let started = 0;
    const batch = (): void => {
      for (let i = 0; i < 50 && started < plan.count && !flood.#stopped; i++, started++) {
        flood.#open();
      }
      if (started < plan.count && !flood.#stopped) setTimeout(batch, 2);
    };
    batch();
    return flood;
  }

  #open(): void {
    const plan = this.#plan;
    if (this.stats.opened >= (plan.maxOpens ?? plan.count * 100)) return;
    this.stats.opened++;
    const socket = connect({
      port: plan.port,
      host: plan.host ?? '127.0.0.1',
      ...(plan.localAddress !== undefined && { localAddress: plan.localAddress }),
    });
    this.#sockets.add(socket);
    this.stats.open = this.#sockets.size;
    const openedAt = performance.now();
    let timer: NodeJS.Timeout | null = null;
    socket.on('error', () => undefined);
    socket.resume();
    socket.once('connect', () => {
      if (plan.mode !== 'slowloris') return;
      socket.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: `);
      timer = setInterval(() => socket.write('a'), plan.intervalMs ?? 100);
    });
    socket.once('close', () => {
      if (timer !== null) clearInterval(timer);
      this.#sockets.delete(socket);
      this.stats.open = this.#sockets.size;
      if (this.#stopped) return;
      this.stats.closedByServer++;
      this.stats.lifetimesMs.push(performance.now() - openedAt);
      if (plan.reconnect === true) this.#open();
    });
  }

  /** Closes every connection and opens no more. Idempotent. */
  stop(): void {
    this.#stopped = true;
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
    this.stats.open = 0;
  }
}
