/**
 * Test-only TLS material, generated with the `openssl` command at test time
 * into a temporary folder (no private key is ever committed): a CA, a server
 * certificate for `localhost` and 127.0.0.1 signed by it, a client
 * certificate signed by it, and a second, unrelated CA with its own server
 * and client certificates (for "wrong CA" cases).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface CertFiles {
  dir: string;
  caPem: string;
  serverPem: string;
  serverKey: string;
  clientPem: string;
  clientKey: string;
  /** An unrelated CA and certificates it signed. */
  otherCaPem: string;
  otherServerPem: string;
  otherServerKey: string;
  otherClientPem: string;
  otherClientKey: string;
}

let cached: CertFiles | null | undefined;

/** True when the `openssl` command can be run here. */
export function opensslAvailable(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

function issue(dir: string, ca: string, name: string, cn: string, ext: string): void {
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  openssl(dir, [
    'req',
    ...key,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.csr`,
    '-subj',
    `/CN=${cn}`,
  ]);
  writeFileSync(join(dir, `${name}.ext`), ext);
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${ca}.pem`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-out',
    `${name}.pem`,
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
  ]);
}

function makeCa(dir: string, name: string): void {
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  openssl(
    dir,
    ['req', '-x509', ...key, '-keyout', `${name}.key`, '-out', `${name}.pem`].concat([
      '-days',
      '2',
      '-subj',
      `/CN=dtp test ${name}`,
    ]),
  );
}

const SERVER_EXT = 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n';
const CLIENT_EXT = 'extendedKeyUsage=clientAuth\n';

/** The material, generated once per process; null when openssl is missing. */
export function testCerts(): CertFiles | null {
  if (cached !== undefined) return cached;
  if (!opensslAvailable()) return (cached = null);
  const dir = mkdtempSync(join(tmpdir(), 'dtp-certs-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  makeCa(dir, 'ca');
  issue(dir, 'ca', 'server', 'localhost', SERVER_EXT);
  issue(dir, 'ca', 'client', 'dtp-client', CLIENT_EXT);
  makeCa(dir, 'other-ca');
  issue(dir, 'other-ca', 'other-server', 'localhost', SERVER_EXT);
  issue(dir, 'other-ca', 'other-client', 'dtp-client', CLIENT_EXT);
  const at = (file: string): string => join(dir, file);
  cached = {
    dir,
    caPem: at('ca.pem'),
    serverPem: at('server.pem'),
    serverKey: at('server.key'),
    clientPem: at('client.pem'),
    clientKey: at('client.key'),
    otherCaPem: at('other-ca.pem'),
    otherServerPem: at('other-server.pem'),
    otherServerKey: at('other-server.key'),
    otherClientPem: at('other-client.pem'),
    otherClientKey: at('other-client.key'),
  };
  return cached;
}

/** `testCerts()`, or a reason to skip. */
export function certsOrSkip(): CertFiles | string {
  return testCerts() ?? 'openssl is not installed: TLS tests skipped';
}

export function read(path: string): Buffer {
  return readFileSync(path);
}
