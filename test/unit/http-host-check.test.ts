/**
 * The HTTP port's checks before any handler: request targets read without
 * throwing, Host names against the coordinator's own and the configured
 * ones, and the origin of requests that act.
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { HostPolicy, allowedHostEntry, splitHost } from '../../src/http/host-check.js';
import { parseRequestTarget } from '../../src/http/request-target.js';

function request(method: string, headers: Record<string, string>): IncomingMessage {
  return { method, headers } as unknown as IncomingMessage;
}

describe('parseRequestTarget', () => {
  it('refuses targets that are no URL instead of throwing', () => {
    for (const raw of [
      'http://[/',
      '//[',
      'http://a:99999/',
      '*',
      '',
      'x',
      '/a[b',
      '/%zz',
      'ftp://h/',
    ]) {
      assert.equal(parseRequestTarget(raw), null, raw);
    }
  });

  it('reads origin-form as a path, `//` included, and absolute-form with its authority', () => {
    assert.deepEqual(
      [parseRequestTarget('//metrics')?.path, parseRequestTarget('//metrics')?.authority],
      ['//metrics', null],
    );
    const abs = parseRequestTarget('http://Example.com:8080/api/jobs?limit=2');
    assert.deepEqual(
      [abs?.path, abs?.authority, abs?.query.get('limit')],
      ['/api/jobs', 'example.com:8080', '2'],
    );
    assert.equal(parseRequestTarget('/a/../healthz')?.path, '/healthz');
    assert.equal(parseRequestTarget('/api/jobs?search=[x]')?.query.get('search'), '[x]');
  });
});

describe('splitHost and allowedHostEntry', () => {
  it('splits names, IPv4 and bracketed IPv6 with optional ports; refuses the rest', () => {
    assert.deepEqual(splitHost('Example.COM.:80'), { name: 'example.com', port: '80' });
    assert.deepEqual(splitHost('[::1]:9464'), { name: '::1', port: '9464' });
    assert.deepEqual(splitHost('10.0.0.5'), { name: '10.0.0.5', port: '' });
    for (const bad of ['', '[', '[::1', '[zz]', 'a b', 'a:b', 'a:123456', 'évil']) {
      assert.equal(splitHost(bad), null, bad);
    }
  });

  it('normalises flag entries and refuses ports and junk', () => {
    assert.deepEqual(['Dash.Example', '.Corp.Example', '*'].map(allowedHostEntry), [
      'dash.example',
      '.corp.example',
      '*',
    ]);
    for (const bad of ['dash.example:80', '', '.', 'a/b', 'http://x']) {
      assert.equal(allowedHostEntry(bad), null, bad);
    }
  });
});

describe('HostPolicy', () => {
  const policy = new HostPolicy({
    allowedHosts: ['dash.example', '.corp.example'],
    ownNames: ['0.0.0.0', 'coordinator-a'],
  });

  it('allows localhost, IP literals, its own names and the configured ones, at any port', () => {
    for (const host of [
      'localhost:9464',
      'app.localhost',
      '127.0.0.1:1',
      '192.168.1.20',
      '[::1]:80',
      'coordinator-a:9464',
      'DASH.example',
      'corp.example',
      'a.b.corp.example:443',
    ]) {
      assert.equal(policy.allowsHost(host), true, host);
    }
  });

  it('refuses other names (a DNS-rebinding page) and malformed values', () => {
    for (const host of [
      'evil.example',
      'evilcorp.example',
      'localhost.evil.example',
      '0.0.0.0.evil',
      '',
      '[',
    ]) {
      assert.equal(policy.allowsHost(host), false, host);
    }
    assert.equal(policy.refusal(request('GET', {}), 'evil.example:80')?.code, 'HOST_NOT_ALLOWED');
    assert.equal(
      new HostPolicy({ allowedHosts: ['*'], ownNames: [] }).allowsHost('evil.example'),
      true,
    );
  });

  it('refuses requests that act from another origin; reads are never refused for their origin', () => {
    const host = '127.0.0.1:9464';
    const code = (method: string, headers: Record<string, string>): string | null =>
      policy.refusal(request(method, headers), host)?.code ?? null;
    assert.equal(code('POST', {}), null, 'no browser: curl, scripts');
    assert.equal(code('POST', { origin: 'http://127.0.0.1:9464' }), null);
    assert.equal(code('POST', { 'sec-fetch-site': 'same-origin' }), null);
    assert.equal(
      code('DELETE', { origin: 'http://127.0.0.1:9464', 'sec-fetch-site': 'none' }),
      null,
    );
    const crossOrigin: Record<string, string>[] = [
      { origin: 'http://evil.example' },
      { origin: 'http://127.0.0.1:8080' },
      { origin: 'null' },
      { origin: 'http://[' },
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'same-site' },
      { origin: 'http://127.0.0.1:9464', 'sec-fetch-site': 'cross-site' },
    ];
    for (const headers of crossOrigin) {
      assert.equal(code('POST', headers), 'CROSS_ORIGIN', JSON.stringify(headers));
    }
    assert.equal(
      code('GET', { origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' }),
      null,
    );
  });

  it('treats the default ports 80 and 443 as no port (a TLS-terminating proxy in front)', () => {
    const refusal = (origin: string, host: string): string | null =>
      policy.refusal(request('POST', { origin }), host)?.code ?? null;
    assert.equal(refusal('https://dash.example', 'dash.example'), null);
    assert.equal(refusal('http://dash.example', 'dash.example:80'), null);
    assert.equal(refusal('https://dash.example:8443', 'dash.example'), 'CROSS_ORIGIN');
  });
});
