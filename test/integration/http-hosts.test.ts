/**
 * Host and Origin checks on a real coordinator's HTTP port: a request whose
 * Host is not a name of the coordinator is refused (403 HOST_NOT_ALLOWED)
 * even with a valid session cookie, so a DNS-rebinding page gets nothing;
 * localhost, IP literals, the advertised host and `httpAllowedHosts` names
 * pass; `/healthz` answers any Host; a request that acts from another origin
 * is refused (403 CROSS_ORIGIN). Bound to 0.0.0.0, access by IP still works.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startCoordinator, tempDir, type TestCoordinator } from '../helpers/test-coordinator.js';

const TOKEN = 'hosts-client-token';

interface Reply {
  status: number;
  code: string | null;
  cookie: string | null;
}

/** One request to 127.0.0.1 with any headers (Host included); the error code of a JSON error body. */
function call(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        let code: string | null = null;
        try {
          code = (JSON.parse(text) as { error?: { code?: string } }).error?.code ?? null;
        } catch {
          // not JSON
        }
        const setCookie = res.headers['set-cookie']?.[0] ?? null;
        resolve({ status: res.statusCode ?? 0, code, cookie: setCookie?.split(';')[0] ?? null });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const JSON_TYPE = { 'Content-Type': 'application/json' };
const PURGE = JSON.stringify({ state: 'COMPLETED', olderThanMillis: 0 });

describe('Host and Origin on the HTTP port', () => {
  const temp = tempDir('dtp-http-hosts-');
  let guarded: TestCoordinator;
  let port: number;
  let cookie: string;

  before(async () => {
    const tokens = join(temp.dir, 'client.tokens');
    writeFileSync(tokens, `${TOKEN}\n`);
    guarded = await startCoordinator({
      metricsPort: 0,
      heartbeatTimeoutMs: 5_000,
      advertiseHost: 'coordinator-a',
      httpAllowedHosts: ['dash.example', '.corp.example'],
      security: { clientTokenFile: tokens },
    });
    port = guarded.coordinator.httpPort as number;
    const opened = await call(
      port,
      'POST',
      '/api/session',
      JSON_TYPE,
      JSON.stringify({ token: TOKEN }),
    );
    assert.equal(opened.status, 200);
    cookie = opened.cookie as string;
  });
  after(async () => {
    await guarded?.close();
    temp.remove();
  });

  it('refuses a request with a valid session cookie whose Host is another name (DNS rebinding)', async () => {
    for (const [method, path, body] of [
      ['POST', '/api/purge', PURGE],
      ['GET', '/api/overview', undefined],
      ['GET', '/metrics', undefined],
      ['GET', '/', undefined],
    ] as const) {
      const reply = await call(
        port,
        method,
        path,
        { ...JSON_TYPE, Cookie: cookie, Host: `evil.example:${port}` },
        body,
      );
      assert.deepEqual([reply.status, reply.code], [403, 'HOST_NOT_ALLOWED'], `${method} ${path}`);
    }
    const absolute = await call(port, 'GET', `http://evil.example:${port}/api/overview`, {
      Cookie: cookie,
      Host: `127.0.0.1:${port}`,
    });
    assert.equal(absolute.status, 403, 'an absolute-form target names the host itself');
  });

  it('answers localhost, IP literals, the advertised host and the configured names', async () => {
    for (const host of [
      `127.0.0.1:${port}`,
      `localhost:${port}`,
      `[::1]:${port}`,
      `app.localhost:${port}`,
      `coordinator-a:${port}`,
      `dash.example:${port}`,
      `eu.corp.example:${port}`,
    ]) {
      const reply = await call(
        port,
        'POST',
        '/api/purge',
        { ...JSON_TYPE, Cookie: cookie, Host: host },
        PURGE,
      );
      assert.equal(reply.status, 200, host);
    }
  });

  it('answers /healthz whatever the Host', async () => {
    assert.equal((await call(port, 'GET', '/healthz', { Host: 'evil.example' })).status, 200);
  });

  it('refuses requests that act from another origin, and lets same-origin and non-browser ones through', async () => {
    const acting = (headers: Record<string, string>) =>
      call(port, 'POST', '/api/purge', { ...JSON_TYPE, Cookie: cookie, ...headers }, PURGE);
    const refused: Record<string, string>[] = [
      { Origin: 'http://evil.example' },
      { Origin: `http://127.0.0.1:${port + 1}` },
      { Origin: 'null' },
      { 'Sec-Fetch-Site': 'cross-site' },
      { 'Sec-Fetch-Site': 'same-site' },
    ];
    for (const headers of refused) {
      const reply = await acting(headers);
      assert.deepEqual([reply.status, reply.code], [403, 'CROSS_ORIGIN'], JSON.stringify(headers));
    }
    const passed: Record<string, string>[] = [
      {},
      { Origin: `http://127.0.0.1:${port}`, 'Sec-Fetch-Site': 'same-origin' },
    ];
    for (const headers of passed) {
      assert.equal((await acting(headers)).status, 200, JSON.stringify(headers));
    }
    const logout = await call(port, 'DELETE', '/api/session', {
      Cookie: cookie,
      Origin: 'http://evil.example',
    });
    assert.deepEqual([logout.status, logout.code], [403, 'CROSS_ORIGIN']);
    const read = await call(port, 'GET', '/api/overview', {
      Cookie: cookie,
      Origin: 'http://evil.example',
    });
    assert.equal(
      read.status,
      200,
      'reading is not refused for its origin (CORS keeps the page from it)',
    );
  });

  it('still answers access by IP and by its host name when bound to 0.0.0.0', async () => {
    const open = await startCoordinator({ metricsPort: 0, bindHost: '0.0.0.0' });
    try {
      const p = open.coordinator.httpPort as number;
      for (const host of [`127.0.0.1:${p}`, `${hostname()}:${p}`]) {
        assert.equal(
          (await call(p, 'POST', '/api/purge', { ...JSON_TYPE, Host: host }, PURGE)).status,
          200,
          host,
        );
      }
      assert.equal((await call(p, 'GET', '/api/overview', { Host: 'evil.example' })).status, 403);
    } finally {
      await open.close();
    }
  });
});
