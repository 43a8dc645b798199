/**
 * The guard's start-up warnings, its description for the start-up line, and
 * the throttled log of bounds that bite.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Guard } from '../../src/coordinator/ports/guard.js';
import { LogThrottle } from '../../src/observability/log-throttle.js';
import { createLogger } from '../../src/observability/logger.js';

const dir = mkdtempSync(join(tmpdir(), 'dtp-guard-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function captured(): { logger: ReturnType<typeof createLogger>; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const destination = {
    write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>),
  };
  return {
    logger: createLogger({ name: 't', format: 'json', level: 'debug', destination }),
    lines,
  };
}

function tokenFile(name: string, mode: number): string {
  const path = join(dir, name);
  writeFileSync(path, 'a-token-of-some-length\n', { mode });
  return path;
}

describe('Guard', () => {
  it('warns at start when it listens beyond loopback without tokens', () => {
    const { logger, lines } = captured();
    new Guard({}, {}, 6_000, logger).warnAtStart('0.0.0.0');
    const warning = lines.find((l) => String(l.msg).includes('non-loopback'));
    assert.ok(warning, JSON.stringify(lines));
    assert.equal(warning.unauthenticated, 'clients,workers');
  });

  it('does not warn on loopback, nor with both token files', () => {
    const { logger, lines } = captured();
    new Guard({}, {}, 6_000, logger).warnAtStart('127.0.0.1');
    new Guard({}, {}, 6_000, logger).warnAtStart('::1');
    const both = {
      clientTokenFile: tokenFile('c', 0o600),
      workerTokenFile: tokenFile('w', 0o600),
    };
    new Guard(both, {}, 6_000, logger).warnAtStart('0.0.0.0');
    assert.deepEqual(lines, []);
  });

  it('warns about a token file that others can read', () => {
    const { logger, lines } = captured();
    new Guard({ clientTokenFile: tokenFile('open', 0o644) }, {}, 6_000, logger).warnAtStart(
      '127.0.0.1',
    );
    assert.ok(lines.some((l) => String(l.msg).includes('readable by other users')));
  });

  it('describes what is on, without any token', () => {
    const { logger } = captured();
    const guard = new Guard({ clientTokenFile: tokenFile('d', 0o600) }, {}, 6_000, logger);
    assert.deepEqual(guard.describe(), { tls: 'off', clientTokens: 1, workerTokens: 0 });
    assert.equal(guard.limits.handshakeTimeoutMs, 6_000);
    assert.equal(new Guard({}, {}, 200, logger).limits.handshakeTimeoutMs, 1_000);
  });
});

describe('LogThrottle', () => {
  it('logs the first of a kind, counts the rest of the window, and reports them with the next', () => {
    const { logger, lines } = captured();
    let now = 0;
    const throttle = new LogThrottle(logger, { windowMs: 1_000, now: () => now });
    throttle.warn('a', { n: 1 }, 'bit');
    throttle.warn('a', { n: 2 }, 'bit');
    throttle.warn('b', { n: 3 }, 'other');
    throttle.warn('a', { n: 4 }, 'bit');
    now = 1_000;
    throttle.warn('a', { n: 5 }, 'bit');
    assert.deepEqual(
      lines.map((l) => [l.msg, l.n, l.similarNotLogged]),
      [
        ['bit', 1, undefined],
        ['other', 3, undefined],
        ['bit', 5, 2],
      ],
    );
  });
});
