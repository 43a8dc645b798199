/**
 * The HTTP port of sharded coordinators, in-process on one PostgreSQL
 * database: `/healthz` answers on each; the JSON API of either lists, shows
 * and cancels the jobs of every shard, those another coordinator leads
 * included; `/metrics` shows which shards the process leads, with each
 * shard's own metrics labelled; once one coordinator stops, the other's API
 * still lists everything. Client tokens guard the port as on one coordinator.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { DtpClient } from '../../src/client/client.js';
import type { CoordinatorOptions } from '../../src/coordinator/options.js';
import { startHttpPort } from '../../src/http/http-server.js';
import type { JobSnapshot } from '../../src/protocol/messages.js';
import { shardOfJobId } from '../../src/protocol/shards.js';
import { ShardedCoordinator } from '../../src/server/sharding/sharded-coordinator.js';
import { HttpApi } from '../helpers/http-api.js';
import { postgresSkip, queryDatabase } from '../helpers/postgres.js';
import { queuesByShard, sharedOut, shardedOptions, shardedScope } from '../helpers/sharded.js';
import { until } from '../helpers/until.js';

const skip = postgresSkip();
const SHARDS = 4;
const scope = shardedScope();
const { database, running, cleanups } = scope;

async function start(
  url: string,
  more: Partial<CoordinatorOptions> = {},
): Promise<{ c: ShardedCoordinator; api: HttpApi }> {
  const c = await ShardedCoordinator.start(
    { ...shardedOptions(url), metricsPort: 0, ...more },
    SHARDS,
    { httpPort: startHttpPort },
  );
  running.push(c);
  assert.ok(c.httpPort !== null && c.httpPort > 0);
  return { c, api: new HttpApi(c.httpPort) };
}

interface Health {
  status: string;
  role: string;
  shards: number;
  led: number[];
}

/** Every job of `/api/jobs`, page after page of 3 (the pages go shard after shard). */
async function listAll(api: HttpApi): Promise<JobSnapshot[]> {
  const jobs: JobSnapshot[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < 100; page++) {
    const query: string = cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`;
    const body = await api.ok<{ jobs: JobSnapshot[]; nextCursor: string | null }>(
      `/api/jobs?limit=3${query}`,
    );
    jobs.push(...body.jobs);
    cursor = body.nextCursor;
    if (cursor === null) return jobs;
  }
  throw new Error('more than 100 pages');
}

/** The value of one series of the exposition, or null when it is absent. */
function sample(text: string, series: string): number | null {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? null : Number(line.slice(series.length + 1));
}

describe('the HTTP port of sharded coordinators', { skip }, () => {
  it('serves health, the API over every shard and per-shard metrics from each coordinator', async () => {
    const url = await database();
    const a = await start(url);
    const b = await start(url);
    await sharedOut([a.c, b.c], SHARDS);

    // Both healthy; together they lead every shard once.
    const healthA = await until(async () => {
      const h = await a.api.ok<Health>('/healthz');
      return h.led.length === a.c.ledShards().length ? h : null;
    });
    const healthB = await until(async () => {
      const h = await b.api.ok<Health>('/healthz');
      return h.led.length === b.c.ledShards().length ? h : null;
    });
    for (const h of [healthA, healthB]) {
      assert.equal(h.status, 'ok');
      assert.equal(h.role, 'sharded');
      assert.equal(h.shards, SHARDS);
    }
    assert.deepEqual(
      [...healthA.led, ...healthB.led].sort(),
      Array.from({ length: SHARDS }, (_, s) => s),
    );

    // A job in each shard, and the jobs of every shard listed from either port.
    const client = await DtpClient.connect({ host: '127.0.0.1', port: a.c.clientPort });
    running.push(client);
    const queues = queuesByShard(SHARDS);
    const ids: string[] = [];
    for (const queue of queues) ids.push((await client.submit('ECHO', {}, { queue })).jobId);
    for (const { api } of [a, b]) {
      const listed = (await listAll(api)).map((j) => j.jobId);
      assert.deepEqual([...listed].sort(), [...ids].sort());
      const { queues: listedQueues } = await api.ok<{ queues: { name: string }[] }>('/api/queues');
      assert.deepEqual(listedQueues.map((q) => q.name).sort(), [...queues].sort());
    }
    // Each names its HTTP port in the membership.
    const members = await queryDatabase<{ http_address: string }>(
      url,
      'SELECT http_address FROM dtp.coordinators',
    );
    assert.deepEqual(
      members.map((m) => m.http_address).sort(),
      [`127.0.0.1:${a.c.httpPort}`, `127.0.0.1:${b.c.httpPort}`].sort(),
    );

    // From A: a job of a shard B leads, shown and then cancelled.
    const elsewhere = ids.find((id) => healthB.led.includes(shardOfJobId(id, SHARDS) ?? -1));
    assert.ok(elsewhere !== undefined);
    const shown = await a.api.ok<{ job: JobSnapshot }>(`/api/jobs/${elsewhere}`);
    assert.equal(shown.job.jobId, elsewhere);
    assert.equal(shown.job.state, 'QUEUED');
    const cancelled = await a.api.expect<{ cancelled: boolean; job: JobSnapshot }>(
      'POST',
      `/api/jobs/${elsewhere}/cancel`,
      200,
      {},
    );
    assert.equal(cancelled.cancelled, true);
    assert.equal((await client.status(elsewhere)).state, 'CANCELLED');

    // The metrics: which shards A leads, their epochs, and each shard's own series.
    const metrics = await a.api.get('/metrics');
    assert.equal(metrics.status, 200);
    const text = metrics.body as string;
    for (let shard = 0; shard < SHARDS; shard++) {
      const led = healthA.led.includes(shard) ? 1 : 0;
      assert.equal(sample(text, `dtp_shard_leader{shard="${shard}"}`), led, `shard ${shard}`);
      assert.ok((sample(text, `dtp_shard_epoch{shard="${shard}"}`) ?? 0) > 0, `shard ${shard}`);
      assert.equal(sample(text, `dtp_shard_outbox_messages{shard="${shard}"}`), 0);
    }
    // Its shards' jobs (one each, all still QUEUED: the cancelled one is in B's); B's at 0 here.
    for (let shard = 0; shard < SHARDS; shard++) {
      const queued = healthA.led.includes(shard) ? 1 : 0;
      assert.equal(sample(text, `dtp_jobs{state="QUEUED",shard="${shard}"}`), queued);
    }
    // A's shards' jobs went through its shared writer: at least one part per commit.
    const commits = sample(text, 'dtp_shard_commits_total') ?? 0;
    const parts = sample(text, 'dtp_shard_commit_parts_total') ?? 0;
    assert.ok(commits > 0 && parts >= commits, `${commits} commits, ${parts} parts`);
    // One family per name, and the process's own series without a shard.
    assert.equal(text.split('\n').filter((l) => l.startsWith('# TYPE dtp_jobs ')).length, 1);
    assert.ok(sample(text, 'dtp_connections{port="client",state="open"}') !== null);
    assert.ok(sample(text, 'process_cpu_user_seconds_total') !== null);
    assert.equal(sample(text, 'dtp_leader'), null);

    // A stops: B takes every shard, and its API still lists every job.
    await a.c.close();
    scope.forget(a.c);
    await sharedOut([b.c], SHARDS);
    const listed = (await listAll(b.api)).map((j) => j.jobId);
    assert.deepEqual([...listed].sort(), [...ids].sort());
    const health = await until(async () => {
      const h = await b.api.ok<Health>('/healthz');
      return h.led.length === SHARDS ? h : null;
    });
    assert.equal(health.status, 'ok');
    const overview = await b.api.ok<{ jobs: { active: number } }>('/api/overview');
    assert.equal(overview.jobs.active, ids.length - 1);
  });

  it('needs a client token for the API and /metrics, and never for /healthz', async () => {
    const url = await database();
    const dir = mkdtempSync(join(tmpdir(), 'dtp-sharded-http-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const tokenFile = join(dir, 'client.tokens');
    writeFileSync(tokenFile, 'client-secret\n', { mode: 0o600 });
    const { c, api } = await start(url, { security: { clientTokenFile: tokenFile } });
    await sharedOut([c], SHARDS);
    assert.equal((await api.get('/healthz')).status, 200);
    assert.equal((await api.get('/api/jobs')).status, 401);
    assert.equal((await api.get('/metrics')).status, 401);
    const authed = api.with({ authorization: 'Bearer client-secret' });
    assert.equal((await authed.get('/api/jobs')).status, 200);
    assert.equal((await authed.get('/metrics')).status, 200);
  });
});
