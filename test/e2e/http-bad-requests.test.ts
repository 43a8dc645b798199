/**
 * Malformed requests against the HTTP port of a coordinator process: a
 * request target that is no URL (`http://[/`, `//[`, a port out of range) is
 * answered 400 and costs only its connection; the process keeps running and
 * `/healthz` keeps answering, with client tokens and without.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { startCoordinatorProcess, type ScriptProcess } from '../helpers/processes.js';
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
