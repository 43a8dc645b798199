/**
 * Sharded coordinators on one PostgreSQL database, in-process: the shards
 * are shared out and move when a coordinator joins or stops; any
 * coordinator serves a request about any queue or job; a different
 * `--shards` is refused.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DtpClient } from '../../src/client/client.js';
import { Coordinator } from '../../src/coordinator/coordinator.js';
import { ShardedCoordinator } from '../../src/server/sharding/sharded-coordinator.js';
import { LocalErrorCode } from '../../src/protocol/error-codes.js';
import { DtpError } from '../../src/protocol/errors.js';
import { shardOfJobId, shardOfQueue } from '../../src/protocol/shards.js';
import { postgresSkip, queryDatabase } from '../helpers/postgres.js';
import { queuesByShard, sharedOut, shardedOptions, shardedScope } from '../helpers/sharded.js';
import { until } from '../helpers/until.js';
import { rawConnection } from '../helpers/raw-peers.js';
import type { Message } from '../../src/protocol/messages.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const skip = postgresSkip();
const SHARDS = 4;
const scope = shardedScope();
const { database, running, cleanups } = scope;

async function start(url: string, shards = SHARDS): Promise<ShardedCoordinator> {
  const c = await ShardedCoordinator.start(shardedOptions(url), shards);
  running.push(c);
  return c;
}

async function clientOf(c: ShardedCoordinator): Promise<DtpClient> {
  const client = await DtpClient.connect({ host: '127.0.0.1', port: c.clientPort });
  running.push(client);
  return client;
}

/** Every shard led, and each coordinator leading its share. */
function balanced(cs: ShardedCoordinator[]): Promise<void> {
  return sharedOut(cs, SHARDS);
}

describe('sharded coordinators', { skip }, () => {
  it('share the shards out, and move them when one joins and when one stops', async () => {
    const url = await database();
    const a = await start(url);
    await balanced([a]);
    const b = await start(url);
    await balanced([a, b]);
    const c = await start(url);
    await balanced([a, b, c]);
    await c.close();
    scope.forget(c);
    await balanced([a, b]);
  });

  it('lists the shards it took at once, before its next round reads the leases', async () => {
    const url = await database();
    // Rounds 10 s apart: the leases it took after its first round are not read before the test ends.
    const slow = { ...shardedOptions(url), leaseTtlMs: 30_000, leaseRenewIntervalMs: 10_000 };
    const a = await ShardedCoordinator.start(slow, SHARDS);
    running.push(a);
    const self = `127.0.0.1:${a.clientPort}`;
    await until(() => a.ledShards().length === SHARDS, { what: 'every shard led' });
    const { shards, coordinators } = a.shardList();
    for (const s of shards) {
      assert.equal(s.leader, self, `shard ${s.shard}`);
      assert.equal(s.epoch, 1);
      assert.equal(s.clientAddress, `127.0.0.1:${a.shard(s.shard).clientPort}`);
      assert.equal(s.workerAddress, `127.0.0.1:${a.shard(s.shard).workerPort}`);
      assert.ok((s.leaseLeftMillis ?? 0) > 10_000, `lease left ${s.leaseLeftMillis} ms`);
    }
    assert.deepEqual(coordinators, [
      { address: self, workerAddress: `127.0.0.1:${a.workerPort}`, shards: SHARDS },
    ]);
  });

  it('holds no database connection once closed, not even those of the terms it gave up', async () => {
    const url = await database();
    const a = await start(url);
    await balanced([a]);
    // Every shard handed over: each term ends and its store closes in the
    // background, while the shard's standby takes its lease again.
    for (let shard = 0; shard < SHARDS; shard++) a.shard(shard).handOver();
    await a.close();
    scope.forget(a);
    // Looked at from another database: this one's own connection would count.
    const name = new URL(url).pathname.slice(1);
    const left = await queryDatabase<{ application_name: string }>(
      process.env.DTP_TEST_PG_URL as string,
      'SELECT application_name FROM pg_stat_activity WHERE datname = $1',
      [name],
    );
    assert.deepEqual(
      left.map((row) => row.application_name),
      [],
      'connections of the closed coordinator',
    );
  });

  it('serve every request about any queue or job from any coordinator', async () => {
    const url = await database();
    const a = await start(url);
    const b = await start(url);
    await balanced([a, b]);
    const viaA = await clientOf(a);
    const viaB = await clientOf(b);
    const queues = queuesByShard(SHARDS);
    const ids: string[] = [];
    for (const [shard, queue] of queues.entries()) {
      const handle = await viaA.submit('ECHO', { shard }, { queue });
      assert.equal(shardOfJobId(handle.jobId, SHARDS), shard, 'the id names its shard');
      ids.push(handle.jobId);
    }
    for (const [shard, id] of ids.entries()) {
      const job = await viaB.status(id);
      assert.equal(job.queue, queues[shard]);
      assert.equal(job.state, 'QUEUED');
    }
    // A batch across every shard, answered in its order.
    const batch = await viaB.submitMany(
      queues.map((queue) => ({ taskType: 'ECHO', payload: {}, queue })),
    );
    assert.deepEqual(
      batch.map((id) => shardOfJobId(id, SHARDS)),
      queues.map((_, shard) => shard),
    );
    // Listings of every queue page through every shard, each job once.
    const seen = new Set<string>();
    let cursor: string | undefined;
    do {
      const page = await viaA.listPage({ limit: 3, ...(cursor !== undefined && { cursor }) });
      for (const job of page.jobs) {
        assert.ok(!seen.has(job.jobId), `${job.jobId} listed twice`);
        seen.add(job.jobId);
      }
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
    assert.equal(seen.size, ids.length + batch.length);
    // Queue settings and cancels reach the queue's shard.
    await viaB.queues.pause(queues[0] as string);
    const listed = await viaA.queues.list();
    assert.equal(listed.find((q) => q.name === queues[0])?.paused, true);
    assert.equal((await viaA.cancel(ids[1] as string)).cancelled, true);
    assert.equal((await viaB.status(ids[1] as string)).state, 'CANCELLED');
    // The map, from either.
    const map = await viaB.shards();
    assert.equal(map.shards.length, SHARDS);
    assert.ok(map.shards.every((s) => s.leader !== null && s.epoch > 0));
    assert.deepEqual(map.coordinators.map((x) => x.shards).sort(), [SHARDS / 2, SHARDS / 2]);
  });

  it('keeps every acknowledged job when a coordinator stops: its shards move to the other', async () => {
    const url = await database();
    const a = await start(url);
    const b = await start(url);
    await balanced([a, b]);
    const viaB = await clientOf(b);
    const queues = queuesByShard(SHARDS);
    const ids = await viaB.submitMany(
      Array.from({ length: 40 }, (_, i) => ({
        taskType: 'ECHO',
        payload: { i },
        queue: queues[i % SHARDS] as string,
      })),
    );
    await a.close();
    scope.forget(a);
    await balanced([b]);
    for (const id of ids) assert.equal((await viaB.status(id)).state, 'QUEUED');
  });

  it('watch, events and wait reach jobs of every shard through one coordinator', async () => {
    const url = await database();
    const a = await start(url);
    const b = await start(url);
    await balanced([a, b]);
    const viaA = await clientOf(a);
    const queues = queuesByShard(SHARDS);
    // Every job's events, from every shard, on one subscription of A.
    const seen = new Map<string, string[]>();
    const abort = new AbortController();
    const events = (async () => {
      for await (const e of viaA.events({}, { signal: abort.signal })) {
        seen.set(e.job.jobId, [...(seen.get(e.job.jobId) ?? []), e.job.state]);
      }
    })().catch(() => undefined);
    // The subscription has a connection of its own: subscribed once every
    // shard's leader holds it.
    const shardIds = Array.from({ length: SHARDS }, (_, shard) => shard);
    await until(
      () =>
        shardIds.every((shard) =>
          [a, b].some(
            (c) => c.ledShards().includes(shard) && c.shard(shard).inspect().subscriptions > 0,
          ),
        ),
      { what: 'the subscription on every shard' },
    );
    const ids: string[] = [];
    for (const queue of queues) ids.push((await viaA.submit('ECHO', {}, { queue })).jobId);
    // A watch and a wait on a job in each shard, ended by a cancel through B.
    const viaB = await clientOf(b);
    const watched = ids.map(async (id) => {
      const states: string[] = [];
      for await (const e of viaA.watch(id)) states.push(e.job.state);
      return states;
    });
    const waited = ids.map((id) => viaA.wait(id, 10_000));
    for (const id of ids) assert.equal((await viaB.cancel(id)).cancelled, true);
    for (const job of await Promise.all(waited)) assert.equal(job.state, 'CANCELLED');
    for (const states of await Promise.all(watched)) assert.equal(states.at(-1), 'CANCELLED');
    await until(() => ids.every((id) => seen.get(id)?.includes('CANCELLED') === true), {
      what: 'the cancels of every shard on the subscription',
    });
    abort.abort();
    await events;
  });

  it('ticks a schedule once per tick while its shard moves between coordinators', async () => {
    const url = await database();
    const a = await start(url);
    const b = await start(url);
    await balanced([a, b]);
    const viaA = await clientOf(a);
    const queue = queuesByShard(SHARDS)[1] as string;
    await viaA.schedules.set('every-second', 'ECHO', { everyMs: 1_000, queue });
    const leaderOf = async (): Promise<ShardedCoordinator> => {
      const map = await viaA.shards();
      const leader = map.shards[shardOfQueue(queue, SHARDS)]?.leader;
      return leader === `127.0.0.1:${a.clientPort}` ? a : b;
    };
    const ticks = async (): Promise<number[]> =>
      (await viaA.listPage({ limit: 100, queue })).jobs
        .map((j) => j.runAtMillis ?? j.createdAtMillis)
        .sort((x, y) => x - y);
    await until(async () => (await ticks()).length >= 2, { what: 'two ticks', timeoutMs: 10_000 });
    // The shard's leader stops; a new one takes the shard (and its schedule) over.
    const first = await leaderOf();
    await first.close();
    scope.forget(first);
    const c = await start(url);
    const survivor = first === a ? b : a;
    await balanced([survivor, c]);
    const via = await clientOf(survivor);
    const before = (await via.listPage({ limit: 100, queue })).jobs.length;
    await until(async () => (await via.listPage({ limit: 100, queue })).jobs.length >= before + 2, {
      what: 'two more ticks after the move',
      timeoutMs: 15_000,
    });
    const all = (await via.listPage({ limit: 100, queue })).jobs.map(
      (j) => j.runAtMillis ?? j.createdAtMillis,
    );
    assert.equal(new Set(all).size, all.length, `a tick made two jobs: ${all.join(', ')}`);
  });

  it('keeps one schedule and one trigger per name when set again with a queue of another shard', async () => {
    const url = await database();
    const a = await start(url);
    const b = await start(url);
    await balanced([a, b]);
    const viaA = await clientOf(a);
    const [first, second] = queuesByShard(SHARDS) as [string, string];
    await viaA.schedules.set('moves', 'ECHO', { everyMs: 60_000, queue: first });
    await viaA.schedules.set('moves', 'ECHO', { everyMs: 60_000, queue: second });
    const schedules = await viaA.schedules.list();
    assert.deepEqual(
      schedules.map((s) => [s.name, s.queue]),
      [['moves', second]],
    );
    await viaA.triggers.set({ name: 'on-order', event: 'order', taskType: 'ECHO', queue: first });
    await viaA.triggers.set({ name: 'on-order', event: 'order', taskType: 'ECHO', queue: second });
    const triggers = await viaA.triggers.list();
    assert.deepEqual(
      triggers.map((t) => [t.name, t.queue]),
      [['on-order', second]],
    );
  });

  it('forwards with the client token read again on reload', async () => {
    const url = await database();
    const dir = mkdtempSync(join(tmpdir(), 'dtp-shard-tokens-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const tokenFile = join(dir, 'client.tokens');
    writeFileSync(tokenFile, 'old-secret\n', { mode: 0o600 });
    const withTokens = async (): Promise<ShardedCoordinator> => {
      const c = await ShardedCoordinator.start(
        { ...shardedOptions(url), security: { clientTokenFile: tokenFile } },
        SHARDS,
      );
      running.push(c);
      return c;
    };
    const a = await withTokens();
    const b = await withTokens();
    await balanced([a, b]);
    // The token changes everywhere before A forwarded anything to B.
    writeFileSync(tokenFile, 'new-secret\n', { mode: 0o600 });
    a.reload();
    b.reload();
    const client = await DtpClient.connect({
      host: '127.0.0.1',
      port: a.clientPort,
      token: 'new-secret',
    });
    running.push(client);
    // A's own map, once its round has read B's leases.
    const elsewhere = await until(
      async () =>
        (await client.shards()).shards.find((s) => s.leader === `127.0.0.1:${b.clientPort}`),
      { what: 'a shard of B in A’s map' },
    );
    const queue = queuesByShard(SHARDS)[elsewhere.shard] as string;
    const handle = await client.submit('ECHO', {}, { queue });
    assert.equal(shardOfJobId(handle.jobId, SHARDS), elsewhere.shard);
  });

  it('tells only workers with a token where the shards take workers', async () => {
    const url = await database();
    const dir = mkdtempSync(join(tmpdir(), 'dtp-shard-tokens-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const tokenFile = join(dir, 'worker.tokens');
    writeFileSync(tokenFile, 'worker-secret\n', { mode: 0o600 });
    const c = await ShardedCoordinator.start(
      { ...shardedOptions(url), security: { workerTokenFile: tokenFile } },
      SHARDS,
    );
    running.push(c);
    const ask = async (msg: Message): Promise<Message> => {
      const raw = await rawConnection(c.workerPort);
      raw.conn.send(msg);
      const reply = await raw.inbox.next();
      await raw.conn.destroy('done');
      return reply;
    };
    const none = await ask({ type: 'LIST_SHARDS' });
    assert.equal(none.type === 'ERROR' && none.code, 'UNAUTHENTICATED');
    const wrong = await ask({ type: 'LIST_SHARDS', authToken: 'guess' });
    assert.equal(wrong.type === 'ERROR' && wrong.code, 'UNAUTHENTICATED');
    const list = await ask({ type: 'LIST_SHARDS', authToken: 'worker-secret' });
    assert.equal(list.type === 'SHARD_LIST' && list.shards.length, SHARDS);
    const refused = await ask({
      type: 'WORKER_REGISTER',
      workerId: 'w',
      capacity: 1,
      taskTypes: null,
      authToken: 'worker-secret',
    });
    assert.ok(refused.type === 'ERROR' && refused.code === 'NOT_LEADER');
    assert.equal(refused.shards?.length, SHARDS);
  });

  it('refuses another shard count, sharded or not', async () => {
    const url = await database();
    await start(url);
    await assert.rejects(
      ShardedCoordinator.start(shardedOptions(url), 8),
      (err: unknown) => err instanceof DtpError && err.code === LocalErrorCode.ShardsMismatch,
    );
    await assert.rejects(
      Coordinator.start(shardedOptions(url)),
      (err: unknown) => err instanceof DtpError && err.code === LocalErrorCode.ShardsMismatch,
    );
  });
});
