/**
 * dtp without `@opentelemetry/api`: in a process where the package cannot be
 * imported (resolution hooks refuse it), a coordinator, a worker and a client
 * run jobs as usual, both when nothing set up tracing (then nothing even
 * tries to import the package) and when something registered with the API's
 * global (the import is tried once, fails, and nothing else changes).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';

const run = promisify(execFile);
const fixture = (name: string): string =>
  fileURLToPath(new URL(`../fixtures/${name}`, import.meta.url));

describe('without OpenTelemetry installed', { timeout: 60_000 }, () => {
  it('runs jobs, and imports the package only once something registered with its API', async () => {
    const { stdout } = await run(
      process.execPath,
      ['--import', fixture('refuse-otel.js'), fixture('without-otel.js')],
      { timeout: 50_000 },
    );
    const report = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
    assert.deepEqual(report, {
      plain: 'COMPLETED',
      refusedPlain: 0,
      registered: 'COMPLETED',
      refused: ['@opentelemetry/api'],
    });
  });
});
