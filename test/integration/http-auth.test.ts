/**
 * The HTTP port with client tokens and TLS: /metrics needs a bearer token or
 * a session cookie, /healthz never does; sessions are opened, ended and end
 * with their token's rotation; HTTPS uses the coordinator's certificate; the
 * guard's own metrics are exported.
 */
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { startCoordinator, tempDir, type TestCoordinator } from '../helpers/test-coordinator.js';
import { testCerts } from '../helpers/certs.js';

const TOKEN = 'http-token-6a5b4c3d2e1f0a9b8c7d';
const OTHER = 'http-token-1111222233334444';
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (let fn = cleanups.pop(); fn !== undefined; fn = cleanups.pop()) await fn();
});

async function start(tokens: string[] | null): Promise<{ tc: TestCoordinator; tokenFile: string }> {
  const { dir, remove } = tempDir();
  cleanups.push(remove);
  const tokenFile = join(dir, 'tokens');
  if (tokens !== null) writeFileSync(tokenFile, `${tokens.join('\n')}\n`);
  const tc = await startCoordinator({
    metricsPort: 0,
    security: { clientTokenFile: tokens === null ? null : tokenFile },
  });
  cleanups.push(() => tc.close());
  return { tc, tokenFile };
}

function url(tc: TestCoordinator, path: string): string {
  return `http://127.0.0.1:${tc.coordinator.metricsPort}${path}`;
}

async function openSession(tc: TestCoordinator, token: string): Promise<Response> {
  return fetch(url(tc, '/api/session'), {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ token }),
  });
}

describe('HTTP port without client tokens', () => {
  it('serves /metrics to anyone and answers /api/session with 200', async () => {
    const { tc } = await start(null);
    assert.equal((await fetch(url(tc, '/metrics'))).status, 200);
    assert.equal((await openSession(tc, 'whatever')).status, 200);
  });
});

describe('HTTP port with client tokens', () => {
  it('refuses /metrics without a token or with a wrong one, and serves /healthz', async () => {
    const { tc } = await start([TOKEN]);
    const none = await fetch(url(tc, '/metrics'));
    assert.equal(none.status, 401);
    assert.match(none.headers.get('www-authenticate') ?? '', /Bearer/);
    assert.ok(!(await none.text()).includes('dtp_'));
    const wrong = await fetch(url(tc, '/metrics'), { headers: { Authorization: 'Bearer nope' } });
    assert.equal(wrong.status, 401);
    assert.equal((await fetch(url(tc, '/api/jobs'))).status, 401);
    assert.equal((await fetch(url(tc, '/healthz'))).status, 200);
  });

  it('serves /metrics with the bearer token, and counts the refusals there', async () => {
    const { tc } = await start([TOKEN]);
    await fetch(url(tc, '/metrics'));
    const ok = await fetch(url(tc, '/metrics'), { headers: { Authorization: `Bearer ${TOKEN}` } });
    assert.equal(ok.status, 200);
    const text = await ok.text();
    assert.match(text, /^dtp_auth_refused_total\{port="http"\} 1$/m);
    assert.match(text, /^dtp_connections\{port="client",state="open"\} \d+$/m);
    assert.match(
      text,
      /^dtp_connections_refused_total\{port="worker",limit="max_connections"\} 0$/m,
    );
    assert.match(text, /^dtp_inbound_partial_frame_bytes \d+$/m);
  });

  it('opens a session for a posted token, with an HttpOnly SameSite=Strict cookie accepted like it', async () => {
    const { tc } = await start([TOKEN]);
    const refused = await openSession(tc, 'not-the-token');
    assert.equal(refused.status, 401);
    assert.equal(refused.headers.get('set-cookie'), null);
    const opened = await openSession(tc, TOKEN);
    assert.equal(opened.status, 200);
    const cookie = opened.headers.get('set-cookie') ?? '';
    assert.match(cookie, /^dtp_session=[A-Za-z0-9_-]{40,};/);
    assert.match(cookie, /HttpOnly/);
    assert.match(cookie, /SameSite=Strict/);
    assert.doesNotMatch(cookie, /Secure/, 'plain HTTP: no Secure attribute');
    const session = cookie.split(';')[0] as string;
    assert.equal((await fetch(url(tc, '/metrics'), { headers: { Cookie: session } })).status, 200);
    const forged = `dtp_session=${'A'.repeat(43)}`;
    assert.equal((await fetch(url(tc, '/metrics'), { headers: { Cookie: forged } })).status, 401);
    const ended = await fetch(url(tc, '/api/session'), {
      method: 'DELETE',
      headers: { Cookie: session },
    });
    assert.equal(ended.status, 200);
    assert.equal((await fetch(url(tc, '/metrics'), { headers: { Cookie: session } })).status, 401);
  });

  it('refuses a token sent as a form, not as JSON (415)', async () => {
    const { tc } = await start([TOKEN]);
    const res = await fetch(url(tc, '/api/session'), {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: `token=${TOKEN}`,
    });
    assert.equal(res.status, 415);
    assert.equal(res.headers.get('set-cookie'), null);
  });

  it('ends the sessions of a token that a reload removed, and keeps the others', async () => {
    const { tc, tokenFile } = await start([TOKEN, OTHER]);
    const first = (await openSession(tc, TOKEN)).headers.get('set-cookie')?.split(';')[0] ?? '';
    const second = (await openSession(tc, OTHER)).headers.get('set-cookie')?.split(';')[0] ?? '';
    writeFileSync(tokenFile, `${OTHER}\n`);
    tc.coordinator.reload();
    assert.equal((await fetch(url(tc, '/metrics'), { headers: { Cookie: first } })).status, 401);
    assert.equal((await fetch(url(tc, '/metrics'), { headers: { Cookie: second } })).status, 200);
  });
});

const certs = testCerts();

describe(
  'HTTPS on the HTTP port',
  { skip: certs === null ? 'openssl is not installed' : false },
  () => {
    it('serves /healthz over TLS with the coordinator certificate, and sets Secure cookies', async () => {
      const c = certs!;
      const { dir, remove } = tempDir();
      cleanups.push(remove);
      const tokenFile = join(dir, 'tokens');
      writeFileSync(tokenFile, `${TOKEN}\n`);
      const tc = await startCoordinator({
        metricsPort: 0,
        security: {
          tls: { certFile: c.serverPem, keyFile: c.serverKey },
          clientTokenFile: tokenFile,
        },
      });
      cleanups.push(() => tc.close());
      const ca = readFileSync(c.caPem);
      const get = (path: string, method = 'GET', body?: string) =>
        new Promise<{ status: number; headers: Record<string, unknown> }>((resolve, reject) => {
          const req = httpsRequest(
            {
              host: '127.0.0.1',
              port: tc.coordinator.metricsPort ?? 0,
              path,
              method,
              ca,
              headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
            },
            (res) => {
              res.resume();
              resolve({ status: res.statusCode ?? 0, headers: res.headers });
            },
          );
          req.on('error', reject);
          req.end(body);
        });
      assert.equal((await get('/healthz')).status, 200);
      assert.equal((await get('/metrics')).status, 401);
      const opened = await get('/api/session', 'POST', JSON.stringify({ token: TOKEN }));
      assert.equal(opened.status, 200);
      assert.match(String(opened.headers['set-cookie']), /Secure/);
      // Plain HTTP to the HTTPS port gets nothing useful.
      await assert.rejects(fetch(`http://127.0.0.1:${tc.coordinator.metricsPort}/healthz`));
    });
  },
);
