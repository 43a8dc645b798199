/**
 * Listening and dialling TCP, with lifetimes that end cleanly: a
 * {@link TcpServer} tracks its sockets so `close()` leaves nothing behind, and
 * {@link dial} gives up after a timeout or an abort.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import { DtpError, describeError } from '../protocol/errors.js';

export interface TcpServerOptions {
  /** Sockets accepted at once; more are refused by the kernel backlog (default 10,000). */
  maxConnections?: number;
}

export class TcpServer {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #closing: Promise<void> | null = null;

  constructor(onSocket: (socket: Socket) => void, options: TcpServerOptions = {}) {
    this.#server = createServer({ noDelay: true }, (socket) => {
      this.#sockets.add(socket);
      socket.once('close', () => this.#sockets.delete(socket));
      onSocket(socket);
    });
    this.#server.maxConnections = options.maxConnections ?? 10_000;
  }

  /** Starts listening; resolves with the port actually bound (useful with port 0). */
  async listen(port: number, host: string): Promise<number> {
    this.#server.listen({ port, host, exclusive: true });
    try {
      // once() rejects on 'error', and removes both listeners either way.
      await once(this.#server, 'listening');
    } catch (err) {
      const message = `cannot listen on ${host}:${port}: ${describeError(err)}`;
      throw new DtpError('LISTEN_FAILED', message, { cause: err });
    }
    const address = this.#server.address();
    if (address === null || typeof address === 'string')
      throw new DtpError('LISTEN_FAILED', 'no TCP address');
    return address.port;
  }

  /** Open sockets right now. */
  get connectionCount(): number {
    return this.#sockets.size;
  }

  /** Stops accepting (new connections are refused at once). Idempotent. */
  stopAccepting(): void {
    if (this.#server.listening) this.#server.close();
  }

  /** Stops accepting and destroys every socket. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      const closed = this.#server.listening ? once(this.#server, 'close') : Promise.resolve();
      this.stopAccepting();
      for (const socket of this.#sockets) socket.destroy();
      await closed;
    })();
    return this.#closing;
  }
}

export class DialError extends DtpError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('CONNECT_FAILED', message, options);
  }
}

/** Connects to host:port, failing with {@link DialError} after `timeoutMs`. */
export async function dial(
  host: string,
  port: number,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<Socket> {
  // An already aborted signal never fires 'abort' again: check it up front.
  if (signal?.aborted) {
    throw new DialError(`cannot connect to ${host}:${port}: aborted`, { cause: signal.reason });
  }
  const socket = connect({ host, port, noDelay: true });
  const timer = setTimeout(
    () => socket.destroy(new Error(`timed out after ${timeoutMs} ms`)),
    timeoutMs,
  );
  const onAbort = (): void => {
    socket.destroy(new Error('aborted'));
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await once(socket, 'connect');
    return socket;
  } catch (err) {
    socket.destroy();
    throw new DialError(`cannot connect to ${host}:${port}: ${describeError(err)}`, { cause: err });
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}
