/**
 * PostgreSQL for tests: a server named by `DTP_TEST_PG_URL` (scripts/run-tests.mjs
 * and .ci/run start a private cluster and set it), and a fresh database per
 * use, dropped afterwards.
 *
 * Without a server the PostgreSQL tests are skipped with a message saying
 * so; in CI (`CI=true`) a missing server is an error instead.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

const BASE_URL = process.env.DTP_TEST_PG_URL ?? '';

/** The skip reason for `describe(..., { skip })`, or false when a server is there. */
export function postgresSkip(): string | false {
  if (BASE_URL !== '') return false;
  if (process.env.CI === 'true') {
    throw new Error('DTP_TEST_PG_URL is not set: CI must start a PostgreSQL server');
  }
  return 'no PostgreSQL server: set DTP_TEST_PG_URL (scripts/run-tests.mjs starts one when PostgreSQL is installed)';
}

async function admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: BASE_URL });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** A new empty database on the test server; returns its URL. */
export async function createTestDatabase(): Promise<string> {
  const name = `dtp_t_${randomBytes(6).toString('hex')}`;
  await admin((client) => client.query(`CREATE DATABASE ${name}`));
  const url = new URL(BASE_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Drops a database made by {@link createTestDatabase}, ending its sessions. */
export async function dropTestDatabase(url: string): Promise<void> {
  const name = new URL(url).pathname.slice(1);
  if (!/^dtp_t_[0-9a-f]+$/.test(name)) throw new Error(`not a test database: ${name}`);
  await admin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
}

/** Runs one query on a database (a direct look, beside the code under test). */
export async function queryDatabase<R extends pg.QueryResultRow>(
  url: string,
  text: string,
  values: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}
