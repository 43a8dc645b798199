/**
 * The HTTP port of a coordinator process:
 * - a request target that is no URL (`http://[/`, `//[`, a port out of
 *   range) is answered 400 and costs only its connection; the process keeps
 *   running and `/healthz` keeps answering, with client tokens and without;
 * - `--http-allowed-hosts a,b` (or `DTP_HTTP_ALLOWED_HOSTS`) adds Host names
 *   the port answers; other names get 403; a bad entry is a usage error.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { request } from 'node:http';
import { ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { healthz, rawHttp } from '../helpers/raw-http.js';
import { tempDir } from '../helpers/test-coordinator.js';

const TARGETS = ['http://[/', '//[', 'http://a:99999/', '//[/metrics', 'http://[/api/overview'];

describe('malformed requests on the HTTP port', () => {
  const temp = tempDir('dtp-e2e-http-bad-');
  const procs: ScriptProcess[] = [];
  after(async () => {
    for (const proc of procs) await proc.stop();
    temp.remove();
  });

  async function coordinator(args: string[]): Promise<{ proc: ScriptProcess; httpPort: number }> {
    const c = await startCoordinatorProcess([
      '--database',
      ':memory:',
      '--http-port',
      '0',
      ...args,
    ]);
    procs.push(c.proc);
    const httpPort = Number((await c.proc.waitForOutput(/httpPort"?[=:](\d+)/))[1]);
    return { proc: c.proc, httpPort };
  }

  for (const tokens of [false, true]) {
    it(`answers 400 to request targets that are no URL, ${tokens ? 'with' : 'without'} tokens`, async () => {
      const args: string[] = [];
      if (tokens) {
        const file = join(temp.dir, 'client.tokens');
        writeFileSync(file, 'a-client-token\n');
        args.push('--client-token-file', file);
      }
      const { proc, httpPort } = await coordinator(args);
      for (const target of TARGETS) {
        for (const method of ['GET', 'POST']) {
          const reply = await rawHttp(httpPort, `${method} ${target} HTTP/1.1\r\nHost: x\r\n\r\n`);
          assert.equal(reply.status, 400, `${method} ${target}: ${reply.text}`);
          assert.ok(proc.running, `${method} ${target} stopped the coordinator:\n${proc.output}`);
        }
      }
      assert.equal(await healthz(httpPort), 200);
      assert.doesNotMatch(proc.output, /Invalid URL|uncaught/i);
    });
  }
});

/** GET `path` on 127.0.0.1 with this Host header; resolves with the status. */
function statusFor(port: number, path: string, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { Host: host }, agent: false });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('--http-allowed-hosts', () => {
  const procs: ScriptProcess[] = [];
  after(async () => {
    for (const proc of procs) await proc.stop();
  });

  for (const [how, args, env] of [
    ['the flag', ['--http-allowed-hosts', 'dash.example,.corp.example'], {}],
    ['the environment', [], { DTP_HTTP_ALLOWED_HOSTS: 'dash.example, .corp.example' }],
  ] as const) {
    it(`answers the names given in ${how} and refuses others`, async () => {
      const c = await startCoordinatorProcess(
        ['--database', ':memory:', '--http-port', '0', ...args],
        undefined,
        { env },
      );
      procs.push(c.proc);
      const port = Number((await c.proc.waitForOutput(/httpPort"?[=:](\d+)/))[1]);
      const statuses = [];
      for (const host of ['dash.example', 'eu.corp.example:80', '127.0.0.1', 'evil.example']) {
        statuses.push(await statusFor(port, '/api/overview', host));
      }
      assert.deepEqual(statuses, [200, 200, 200, 403]);
    });
  }

  it('refuses an entry that is no host name, and is listed in --help', async () => {
    const bad = ScriptProcess.start('coordinator.sh', [
      '--http-allowed-hosts',
      'dash.example:8080',
    ]);
    assert.equal(await bad.exited, 2);
    assert.match(bad.output, /--http-allowed-hosts: "dash.example:8080" is not a host name/);
    const help = ScriptProcess.start('coordinator.sh', ['--help']);
    assert.equal(await help.exited, 0);
    const text = help.output.replace(/\s+/g, ' ');
    assert.match(text, /--http-allowed-hosts <names> HTTP port: .*?env DTP_HTTP_ALLOWED_HOSTS/);
  });
});
