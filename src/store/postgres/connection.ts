/**
 * PostgreSQL connection settings shared by the store and the lease: which
 * `--database` values name PostgreSQL, how a URL is shown without its
 * password, and client settings (bigint columns read as numbers: every
 * integer dtp stores is a millisecond time or a count far below 2^53).
 */
import pg from 'pg';
import { describeError } from '../../protocol/errors.js';
import { StoreError } from '../store.js';

const INT8_OID = 20;

/** True when `--database` names a PostgreSQL server rather than a SQLite file. */
export function isPostgresUrl(database: string): boolean {
  return /^postgres(ql)?:\/\//i.test(database);
}

/** The URL with its password replaced by `***`, for logs and errors. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'postgres://(unparsable URL)';
  }
}

function parseInt8(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new Error(`bigint ${text} is outside the safe range`);
  return value;
}

function textParser(oid: number): (text: string) => unknown {
  if (oid === INT8_OID) return parseInt8;
  return pg.types.getTypeParser(oid, 'text') as (text: string) => unknown;
}

/** Per-connection type parsers (pg's global table stays untouched). */
const TYPES = { getTypeParser: textParser };

export interface ConnectionSettings {
  /** `postgres://user[:password]@host:port/db`. */
  url: string;
  /** Name shown in pg_stat_activity. */
  applicationName: string;
  /** Give up connecting after this long, in ms (default 10,000). */
  connectTimeoutMs?: number;
}

/** Options for a pg Client or Pool. */
export function clientConfig(settings: ConnectionSettings): pg.ClientConfig {
  return {
    connectionString: settings.url,
    application_name: settings.applicationName,
    connectionTimeoutMillis: settings.connectTimeoutMs ?? 10_000,
    keepAlive: true,
    types: TYPES,
  };
}

/** A connected client; rejects with {@link StoreError} (the password never appears). */
export async function connectClient(settings: ConnectionSettings): Promise<pg.Client> {
  const client = new pg.Client(clientConfig(settings));
  // A connection that breaks later is reported through the next query; this
  // only keeps an 'error' event from becoming an uncaught exception.
  client.on('error', () => undefined);
  try {
    await client.connect();
    return client;
  } catch (err) {
    await client.end().catch(() => undefined);
    throw new StoreError(`cannot connect to ${redactUrl(settings.url)}: ${describeError(err)}`, {
      cause: err,
    });
  }
}

/** The SQLSTATE of a server error, if it is one. */
export function sqlState(err: unknown): string | null {
  if (typeof err === 'object' && err !== null && 'code' in err) {
    const { code } = err;
    return typeof code === 'string' ? code : null;
  }
  return null;
}
