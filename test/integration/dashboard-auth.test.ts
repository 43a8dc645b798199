/**
 * The HTTP port with client tokens: `/healthz` and the page shell load
 * without one and show no job data; `/metrics` and `/api/*` need a bearer
 * token or a session cookie from `POST /api/session`, which also admits the
 * live stream; a token removed later ends its sessions.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { EventStream, HttpApi } from '../helpers/http-api.js';
import { startCoordinator, tempDir, type TestCoordinator } from '../helpers/test-coordinator.js';

let tc: TestCoordinator;
let api: HttpApi;
let tokenFile: string;
let removeDir: () => void;

before(async () => {
  const dir = tempDir();
  removeDir = dir.remove;
  tokenFile = join(dir.dir, 'client-tokens');
  writeFileSync(tokenFile, 'token-a\ntoken-b\n');
  tc = await startCoordinator({ metricsPort: 0, security: { clientTokenFile: tokenFile } });
  api = new HttpApi(tc.coordinator.httpPort as number);
});

after(async () => {
  await tc.close();
  removeDir();
});

/** Logs in with a token; returns the `name=value` of the session cookie. */
async function login(token: string): Promise<string> {
  const res = await api.call('POST', '/api/session', { token });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const cookie = res.headers.get('set-cookie') ?? '';
  assert.match(cookie, /^dtp_session=[A-Za-z0-9_-]{40,};/);
  assert.match(cookie, /HttpOnly/);
  assert.match(cookie, /SameSite=Strict/);
  return cookie.split(';')[0] as string;
}

describe('HTTP port with client tokens', () => {
  it('serves /healthz and the page shell without a token, and nothing else', async () => {
    assert.equal((await api.get('/healthz')).status, 200);
    const page = await api.get('/');
    assert.equal(page.status, 200);
    assert.doesNotMatch(String(page.body), /jobId|QUEUED/);
    for (const path of [
      '/api/overview',
      '/api/jobs',
      '/api/workers',
      '/api/jobs/x',
      '/api/events',
    ]) {
      assert.match(await api.fails('GET', path, 401), /Unauthenticated/, path);
    }
    await api.fails('POST', '/api/purge', 401, { state: 'FAILED', olderThan: '1d' });
    const metrics = await fetch(`${api.base}/metrics`);
    assert.equal(metrics.status, 401);
    assert.match(metrics.headers.get('www-authenticate') ?? '', /^Bearer/);
    const session = await api.ok('/api/session');
    assert.deepEqual(session, { authRequired: true, authenticated: false });
  });

  it('accepts a bearer token on the API and /metrics, and refuses a wrong one', async () => {
    const authed = api.with({ authorization: 'Bearer token-a' });
    assert.equal((await authed.get('/api/overview')).status, 200);
    assert.equal(
      (await fetch(`${api.base}/metrics`, { headers: { authorization: 'Bearer token-b' } })).status,
      200,
    );
    await api.with({ authorization: 'Bearer nope' }).fails('GET', '/api/jobs', 401);
    await api.with({ authorization: 'Basic token-a' }).fails('GET', '/api/jobs', 401);
  });

  it('opens a session with a cookie that admits the API and the live stream', async () => {
    assert.match(await api.fails('POST', '/api/session', 401, { token: 'wrong' }), /token refused/);
    await api.fails('POST', '/api/session', 401, {});
    await api.fails('POST', '/api/session', 400, { token: '' });
    await api.fails('POST', '/api/session', 415, 'token-a', { 'content-type': 'text/plain' });
    const cookie = await login('token-a');
    const withCookie = api.with({ cookie });
    assert.deepEqual(await withCookie.ok('/api/session'), {
      authRequired: true,
      authenticated: true,
    });
    assert.equal((await withCookie.get('/api/jobs')).status, 200);
    const stream = new EventStream(tc.coordinator.httpPort as number, { cookie });
    try {
      assert.equal(await stream.status, 200);
      await stream.next((e) => e.event === 'overview');
    } finally {
      stream.close();
    }
    const refused = new EventStream(tc.coordinator.httpPort as number, {
      cookie: 'dtp_session=forged',
    });
    try {
      assert.equal(await refused.status, 401);
    } finally {
      refused.close();
    }
  });

  it('ends a session on logout and when its token is removed', async () => {
    const cookie = await login('token-a');
    const out = await api.call('DELETE', '/api/session', undefined, { cookie });
    assert.equal(out.status, 200);
    assert.match(out.headers.get('set-cookie') ?? '', /Max-Age=0/);
    await api.with({ cookie }).fails('GET', '/api/jobs', 401);

    const rotated = await login('token-b');
    assert.equal((await api.with({ cookie: rotated }).get('/api/jobs')).status, 200);
    writeFileSync(tokenFile, 'token-a\n');
    tc.coordinator.reload();
    try {
      await api.with({ cookie: rotated }).fails('GET', '/api/jobs', 401);
    } finally {
      writeFileSync(tokenFile, 'token-a\ntoken-b\n');
      tc.coordinator.reload();
    }
  });
});

describe('HTTP port without client tokens', () => {
  it('needs no token and says so', async () => {
    const open = await startCoordinator({ metricsPort: 0 });
    try {
      const openApi = new HttpApi(open.coordinator.httpPort as number);
      assert.deepEqual(await openApi.ok('/api/session'), {
        authRequired: false,
        authenticated: true,
      });
      assert.equal((await openApi.get('/api/jobs')).status, 200);
    } finally {
      await open.close();
    }
  });
});
