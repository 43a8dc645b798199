/**
 * HTTP over raw sockets for tests of the coordinator's HTTP port: requests
 * written byte for byte (malformed ones included), from a chosen source
 * address, and the answer read back as it came. Every wait is bounded.
 */
import { once } from 'node:events';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';

export interface RawReply {
  /** The status of the first response line, or null when none came. */
  status: number | null;
  /** Everything received, as text. */
  text: string;
  /** The server closed the connection (or reset it) before `timeoutMs`. */
  closed: boolean;
}

export interface RawOptions {
  host?: string;
  /** Source address, e.g. 127.0.0.2. */
  localAddress?: string;
  /** Half-close after writing, so an unfinished request ends (default true). */
  end?: boolean;
  /** Stop waiting for the close after this long (default 5000 ms). */
  timeoutMs?: number;
}

function statusOf(text: string): number | null {
  const match = /^HTTP\/1\.[01] (\d{3})/.exec(text);
  return match === null ? null : Number(match[1]);
}

/** Opens a socket and waits for it to connect (rejects on a refusal). */
export async function openSocket(
  port: number,
  options: { host?: string; localAddress?: string } = {},
): Promise<Socket> {
  const socket = connect({
    port,
    host: options.host ?? '127.0.0.1',
    ...(options.localAddress !== undefined && { localAddress: options.localAddress }),
  });
  await once(socket, 'connect');
  return socket;
}

/** Writes `bytes`, then reads until the server closes or `timeoutMs` passes. */
export async function rawHttp(
  port: number,
  bytes: string | Buffer,
  options: RawOptions = {},
): Promise<RawReply> {
  const socket = await openSocket(port, options);
  let text = '';
  socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
  socket.on('error', () => undefined);
  const closed = once(socket, 'close').then(() => true);
  socket.write(bytes);
  if (options.end !== false) socket.end();
  const timedOut = new Promise<false>((resolve) => {
    const timer = setTimeout(() => resolve(false), options.timeoutMs ?? 5_000);
    void closed.then(() => clearTimeout(timer));
  });
  const done = await Promise.race([closed, timedOut]);
  socket.destroy();
  return { status: statusOf(text), text, closed: done };
}

/**
 * `GET /healthz` on a connection of its own from `localAddress`; resolves
 * with the status, or null when no answer came within `timeoutMs`.
 */
export function healthz(
  port: number,
  options: { localAddress?: string; timeoutMs?: number; host?: string } = {},
): Promise<number | null> {
  return new Promise((resolve) => {
    const req = request({
      host: options.host ?? '127.0.0.1',
      port,
      path: '/healthz',
      agent: false,
      ...(options.localAddress !== undefined && { localAddress: options.localAddress }),
    });
    const timer = setTimeout(() => {
      req.destroy();
      resolve(null);
    }, options.timeoutMs ?? 2_000);
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => {
        clearTimeout(timer);
        resolve(res.statusCode ?? null);
      });
    });
    req.on('error', () => {
      clearTimeout(timer);
      resolve(null);
    });
    req.end();
  });
}
