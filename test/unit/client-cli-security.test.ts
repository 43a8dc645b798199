/**
 * The client CLI's TLS and token settings: from `--token-file`,
 * `DTP_TOKEN_FILE` or `DTP_TOKEN`, and `--tls` / `--tls-ca` / `DTP_TLS_CA`,
 * handed to the connection; an unreadable file is a usage error.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { DtpClient } from '../../src/client/client.js';
import type { ConnectionSecurity } from '../../src/client/connection.js';
import { runClientCli } from '../../src/cli/client-cli.js';

const dir = mkdtempSync(join(tmpdir(), 'dtp-cli-sec-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const tokenFile = join(dir, 'token');
writeFileSync(tokenFile, '# mine\nfile-token-123\nsecond-line\n');
const caFile = join(dir, 'ca.pem');
writeFileSync(caFile, 'not really a certificate, but a file');

async function securityOf(
  argv: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; security: ConnectionSecurity | null; stderr: string }> {
  let security: ConnectionSecurity | null = null;
  let stderr = '';
  const fake = {
    workerList: () => Promise.resolve({ workers: [], leader: null, epoch: null }),
    close: () => Promise.resolve(),
  };
  const code = await runClientCli(argv, {
    stdout: () => undefined,
    stderr: (text) => (stderr += text),
    env,
    color: false,
    interactive: false,
    connect: (_host, _port, given) => {
      security = given;
      return Promise.resolve(fake as unknown as DtpClient);
    },
  });
  return { code, security, stderr };
}

describe('client CLI security settings', () => {
  it('connects plain and without a token by default', async () => {
    const { code, security } = await securityOf(['workers']);
    assert.equal(code, 0);
    assert.deepEqual(security, { tls: null, token: null });
  });

  it('takes the first token of --token-file, DTP_TOKEN_FILE, or DTP_TOKEN itself', async () => {
    assert.equal(
      (await securityOf(['workers', '--token-file', tokenFile])).security?.token,
      'file-token-123',
    );
    assert.equal(
      (await securityOf(['workers'], { DTP_TOKEN_FILE: tokenFile })).security?.token,
      'file-token-123',
    );
    assert.equal(
      (await securityOf(['workers'], { DTP_TOKEN: 'env-token' })).security?.token,
      'env-token',
    );
  });

  it('uses TLS with --tls (system CAs) and with a CA from --tls-ca or DTP_TLS_CA', async () => {
    assert.deepEqual((await securityOf(['workers', '--tls'])).security?.tls, {});
    const ca = (await securityOf(['workers', '--tls-ca', caFile])).security?.tls?.ca;
    assert.ok(Buffer.isBuffer(ca));
    const fromEnv = (await securityOf(['workers'], { DTP_TLS_CA: caFile })).security?.tls?.ca;
    assert.ok(Buffer.isBuffer(fromEnv));
  });

  it('exits 2 for a token file it cannot read, or a certificate without its key', async () => {
    const missing = await securityOf(['workers', '--token-file', join(dir, 'nope')]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /--token-file: cannot read/);
    const halfCert = await securityOf(['workers', '--tls-cert', caFile]);
    assert.equal(halfCert.code, 2);
    assert.match(halfCert.stderr, /--tls-cert and --tls-key/);
  });
});
