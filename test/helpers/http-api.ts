/**
 * A small caller of the coordinator's HTTP API for tests: JSON in and out,
 * an optional bearer token or cookie, and a reader of the live event stream.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';

/** The body of an answer other than 2xx. */
export interface ErrorBody {
  error: { code: string; message: string };
}

export interface ApiResponse {
  status: number;
  headers: Headers;
  /** Parsed JSON, or the text when the body is not JSON. */
  body: unknown;
}

export class HttpApi {
  readonly base: string;
  readonly #headers: Record<string, string>;

  constructor(port: number, headers: Record<string, string> = {}) {
    this.base = `http://127.0.0.1:${port}`;
    this.#headers = headers;
  }

  /** The same API with more headers (a token, a cookie). */
  with(headers: Record<string, string>): HttpApi {
    return new HttpApi(Number(new URL(this.base).port), { ...this.#headers, ...headers });
  }

  async call(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<ApiResponse> {
    const init: RequestInit = { method, headers: { ...this.#headers, ...headers } };
    if (body !== undefined) {
      init.body = typeof body === 'string' ? body : JSON.stringify(body);
      (init.headers as Record<string, string>)['content-type'] ??= 'application/json';
    }
    const res = await fetch(`${this.base}${path}`, init);
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON: keep the text
    }
    return { status: res.status, headers: res.headers, body: parsed };
  }

  get(path: string): Promise<ApiResponse> {
    return this.call('GET', path);
  }

  post(path: string, body: unknown = {}): Promise<ApiResponse> {
    return this.call('POST', path, body);
  }

  /** GET that must answer 200; returns the body as the caller says it is. */
  async ok<T>(path: string): Promise<T> {
    const res = await this.get(path);
    assert.equal(res.status, 200, `${path}: ${JSON.stringify(res.body)}`);
    return res.body as T;
  }

  /** A call that must answer `status`; returns the body as the caller says it is. */
  async expect<T>(method: string, path: string, status: number, body?: unknown): Promise<T> {
    const res = await this.call(method, path, body);
    assert.equal(res.status, status, `${method} ${path}: ${JSON.stringify(res.body)}`);
    return res.body as T;
  }

  /** Expects a 4xx with `{error: {code, message}}`; returns the message. */
  async fails(
    method: string,
    path: string,
    status: number,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<string> {
    const res = await this.call(method, path, body, headers);
    assert.equal(res.status, status, `${method} ${path}: ${JSON.stringify(res.body)}`);
    const { error } = res.body as ErrorBody;
    assert.equal(typeof error.code, 'string', 'error has a code');
    assert.ok(error.message.length > 0, 'error has a message');
    return error.message;
  }
}

export interface SseEvent {
  event: string;
  data: unknown;
}

/**
 * Opens `/api/events` and collects its events; `next(predicate)` resolves
 * with the first one (already seen or future) that matches.
 */
export class EventStream {
  readonly events: SseEvent[] = [];
  readonly #waiters: { match: (e: SseEvent) => boolean; resolve: (e: SseEvent) => void }[] = [];
  readonly #close: () => void;
  readonly status: Promise<number>;

  constructor(port: number, headers: Record<string, string> = {}) {
    let resolveStatus: (n: number) => void = () => undefined;
    this.status = new Promise((resolve) => (resolveStatus = resolve));
    const req = request({ host: '127.0.0.1', port, path: '/api/events', headers }, (res) => {
      resolveStatus(res.statusCode ?? 0);
      res.setEncoding('utf8');
      let buffer = '';
      res.on('data', (chunk: string) => {
        buffer += chunk;
        let end = buffer.indexOf('\n\n');
        while (end >= 0) {
          this.#parse(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
          end = buffer.indexOf('\n\n');
        }
      });
    });
    req.on('error', () => undefined);
    req.end();
    this.#close = () => req.destroy();
  }

  #parse(block: string): void {
    let event = 'message';
    let data = '';
    for (const line of block.split('\n')) {
      if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('data: ')) data += line.slice(6);
    }
    if (data === '') return;
    const parsed: SseEvent = { event, data: JSON.parse(data) as unknown };
    this.events.push(parsed);
    for (const waiter of [...this.#waiters]) {
      if (!waiter.match(parsed)) continue;
      this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
      waiter.resolve(parsed);
    }
  }

  next(match: (e: SseEvent) => boolean, timeoutMs = 5_000): Promise<SseEvent> {
    const seen = this.events.find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error('no matching live event in time')),
        timeoutMs,
      );
      this.#waiters.push({
        match,
        resolve: (e) => {
          clearTimeout(timer);
          resolve(e);
        },
      });
    });
  }

  close(): void {
    this.#close();
  }
}
