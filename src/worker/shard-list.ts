/**
 * Asking a sharded coordinator's public worker port for the shard map: a
 * connection of its own (never a session's), one LIST_SHARDS frame, the
 * SHARD_LIST it answers, then closed. The worker's coordinator addresses
 * (`coordinatorHost`) are tried in turn until one answers: any of them knows
 * the whole map, and one that is down or answers something else (an ERROR,
 * a coordinator that does not take LIST_SHARDS there) is skipped.
 */
import { formatHostPort, type HostPort } from '../net/address.js';
import { FramedConnection, describeCloseReason } from '../net/framed-connection.js';
import type { ClientTls } from '../net/tls.js';
import { dial } from '../net/tcp.js';
import { describeError } from '../protocol/errors.js';
import { clipError } from '../protocol/limits.js';
import type { ShardList } from '../protocol/messages.js';

export interface ShardListOptions {
  /** For the dial, and for the answer after it, in ms. */
  readonly timeoutMs: number;
  readonly tls: ClientTls | null;
  /** The worker token, for a coordinator that requires one. */
  readonly authToken?: string | null;
  /** Aborts a dial under way (the worker is closing). */
  readonly signal: AbortSignal;
}

/** The map from the first address that gives one, and which it was; else why each failed. */
export type ShardListAnswer =
  | { readonly ok: true; readonly list: ShardList; readonly from: string }
  | { readonly ok: false; readonly problems: readonly string[] };

export async function askShardList(
  addresses: readonly HostPort[],
  options: ShardListOptions,
): Promise<ShardListAnswer> {
  const problems: string[] = [];
  for (const address of addresses) {
    if (options.signal.aborted) break;
    const from = formatHostPort(address);
    try {
      return { ok: true, list: await askOne(address, options), from };
    } catch (err) {
      problems.push(`${from}: ${describeError(err)}`);
    }
  }
  return { ok: false, problems };
}

/** One address: its SHARD_LIST, or an Error saying what came instead. */
async function askOne(address: HostPort, options: ShardListOptions): Promise<ShardList> {
  const socket = await dial(
    address.host,
    address.port,
    options.timeoutMs,
    options.signal,
    options.tls,
  );
  return new Promise<ShardList>((resolve, reject) => {
    let settled = false;
    const settle = (outcome: ShardList | Error): void => {
      if (settled) return;
      settled = true;
      void connection.close('shard map received');
      if (outcome instanceof Error) reject(outcome);
      else resolve(outcome);
    };
    const connection: FramedConnection = new FramedConnection(socket, {
      onMessage: (msg) => {
        if (msg.type === 'SHARD_LIST') settle(msg);
        else if (msg.type === 'ERROR') {
          settle(new Error(`ERROR ${msg.code ?? ''}: ${clipError(msg.message)}`));
        } else settle(new Error(`${msg.type} instead of SHARD_LIST`));
      },
      onProtocolError: (err) => settle(new Error(`protocol error: ${err.message}`)),
      onClose: (reason) =>
        settle(new Error(`closed before SHARD_LIST (${describeCloseReason(reason)})`)),
    });
    connection.setIdleTimeout(options.timeoutMs, () =>
      settle(new Error(`no SHARD_LIST within ${options.timeoutMs} ms`)),
    );
    const token = options.authToken ?? null;
    connection.send({ type: 'LIST_SHARDS', ...(token !== null && { authToken: token }) });
  });
}

/**
 * When the worker asks for the map again: every `intervalMs`, and at once
 * when told to (a session lost its connection). One query at a time; a
 * request that comes during one runs another right after it, so the map
 * read last is never older than the latest reason to look.
 */
export class MapRefresher {
  readonly #refresh: (why: string) => Promise<void>;
  readonly #intervalMs: number;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  #again: string | null = null;
  #stopped = false;

  constructor(refresh: (why: string) => Promise<void>, intervalMs: number) {
    this.#refresh = refresh;
    this.#intervalMs = intervalMs;
  }

  /** Starts the periodic queries (once). */
  start(): void {
    if (this.#stopped || this.#timer !== null) return;
    this.#timer = setInterval(() => this.request('periodic'), this.#intervalMs);
    this.#timer.unref();
  }

  /** Asks now, or right after the query under way. */
  request(why: string): void {
    if (this.#stopped) return;
    if (this.#running !== null) {
      this.#again = why;
      return;
    }
    this.#running = this.#refresh(why).finally(() => {
      this.#running = null;
      const again = this.#again;
      this.#again = null;
      if (again !== null) this.request(again);
    });
  }

  /** No more queries; resolves once the one under way (if any) has ended. */
  stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
    return this.#running ?? Promise.resolve();
  }
}
