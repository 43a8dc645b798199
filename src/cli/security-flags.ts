/**
 * TLS and token flags of the programs that dial a coordinator (worker and
 * client): `--tls`, `--tls-ca`, `--tls-cert`, `--tls-key`, `--token-file`
 * (or the environment's `DTP_TOKEN`). The coordinator's own are in
 * coordinator-flags.ts.
 */
import { readFileSync } from 'node:fs';
import { readClientTls, type ClientTls } from '../net/tls.js';
import { describeError } from '../protocol/errors.js';
import { parseTokens } from '../coordinator/ports/access.js';
import { UsageError } from './flags.js';
import type { FlagSpec, FlagValues } from './flags.js';

/** A worker's or client's TLS and token flags. */
export const DIALLER_SECURITY_FLAGS: readonly FlagSpec[] = [
  { name: 'tls', type: 'boolean', help: 'connect with TLS, trusting the system CAs' },
  {
    name: 'tls-ca',
    type: 'string',
    placeholder: 'pem',
    defaultLabel: 'system CAs',
    help: 'trust this CA instead (implies --tls)',
  },
  {
    name: 'tls-cert',
    type: 'string',
    placeholder: 'pem',
    help: 'present this client certificate (with --tls-key; implies --tls)',
  },
  { name: 'tls-key', type: 'string', placeholder: 'pem', help: 'key of --tls-cert' },
  {
    name: 'token-file',
    type: 'string',
    placeholder: 'file',
    defaultLabel: 'env DTP_TOKEN',
    help: 'file whose first line is the token to authenticate with',
  },
];

/** The token: `--token-file` (or DTP_TOKEN_FILE), else DTP_TOKEN; null when neither is set. */
export function tokenFrom(values: FlagValues, env: NodeJS.ProcessEnv): string | null {
  const file = values.optionalString('token-file');
  if (file !== undefined) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new UsageError(`--token-file: cannot read ${file}: ${describeError(err)}`);
    }
    const token = parseTokens(text)[0];
    if (token === undefined) throw new UsageError(`--token-file: ${file} holds no token`);
    return token;
  }
  const fromEnv = env.DTP_TOKEN?.trim() ?? '';
  return fromEnv === '' ? null : fromEnv;
}

/** The TLS settings of a dialler; null for plain TCP. */
export function clientTlsFrom(values: FlagValues): ClientTls | null {
  const caFile = values.optionalString('tls-ca') ?? null;
  const certFile = values.optionalString('tls-cert') ?? null;
  const keyFile = values.optionalString('tls-key') ?? null;
  if (!values.bool('tls') && caFile === null && certFile === null && keyFile === null) return null;
  try {
    return readClientTls({ caFile, certFile, keyFile });
  } catch (err) {
    throw new UsageError(describeError(err));
  }
}
