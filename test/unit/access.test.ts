/**
 * Token files: one token per line (blank lines and `#` comments ignored),
 * several for rotation, any listed one accepted, an empty or unreadable file
 * refused, and a reload that fails keeping the old tokens.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import {
  AccessControl,
  TokenFile,
  TokenFileError,
  parseTokens,
} from '../../src/coordinator/ports/access.js';

const dir = mkdtempSync(join(tmpdir(), 'dtp-access-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe('token files', () => {
  it('reads one token per line, trimmed, without blank lines and comments', () => {
    assert.deepEqual(parseTokens('# rotation\n  alpha-1 \r\n\nbeta-2\n#gamma\n'), [
      'alpha-1',
      'beta-2',
    ]);
  });

  it('accepts every listed token and nothing else', () => {
    const tokens = TokenFile.load(file('two', 'alpha-1\nbeta-2\n'));
    assert.equal(tokens.count, 2);
    assert.equal(tokens.matches('alpha-1'), true);
    assert.equal(tokens.matches('beta-2'), true);
    for (const wrong of ['alpha', 'alpha-1 ', 'ALPHA-1', '', 'beta-22', null, 42, undefined]) {
      assert.equal(tokens.matches(wrong), false, String(wrong));
    }
    const digest = createHash('sha256').update('beta-2').digest();
    assert.equal(tokens.matchesDigest(digest), true);
    assert.equal(tokens.matchesDigest(Buffer.alloc(5)), false);
  });

  it('refuses a file without a token, or one it cannot read', () => {
    assert.throws(() => TokenFile.load(file('empty', '\n# none\n')), TokenFileError);
    assert.throws(() => TokenFile.load(join(dir, 'missing')), /cannot read token file/);
  });

  it('keeps the old tokens when a reload finds the file empty, takes the new ones otherwise', () => {
    const path = file('rotating', 'old-token\n');
    const access = new AccessControl({ clientTokenFile: path });
    writeFileSync(path, '');
    assert.equal(access.reload().length, 1);
    assert.equal(access.allowsClient('old-token'), true);
    writeFileSync(path, 'old-token\nnew-token\n');
    assert.deepEqual(access.reload(), []);
    assert.equal(access.allowsClient('new-token'), true);
    writeFileSync(path, 'new-token\n');
    access.reload();
    assert.equal(access.allowsClient('old-token'), false);
  });

  it('allows everyone on a side without tokens', () => {
    const access = new AccessControl({ workerTokenFile: file('w', 'worker-token\n') });
    assert.equal(access.clientTokensRequired, false);
    assert.equal(access.allowsClient(undefined), true);
    assert.equal(access.allowsWorker(undefined), false);
    assert.equal(access.allowsWorker('worker-token'), true);
  });
});
