/**
 * Sharded coordinators for real: a private PostgreSQL and three
 * `scripts/coordinator.sh --shards 8`, each a process of its own. One is
 * killed (SIGKILL), one is frozen (SIGSTOP) and thawed.
 *
 * Checked: the shards are shared out (`client.sh shards --json`); the
 * killed coordinator's shards move to the others and so do the frozen
 * one's; every acknowledged job is still there afterwards, found through
 * any coordinator; every write to a shard's jobs was made under the lease
 * epoch current for that shard at that moment (an audit kept by the
 * database), so the frozen coordinator wrote nothing after its leases
 * moved; once thawed it gets its share back. A coordinator started with
 * another `--shards` is refused with exit code 2. The HTTP port of one of
 * them (`--http-port`) answers `/healthz` and `/metrics` for its process.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/client.js';
import { shardOfQueue } from '../../src/protocol/shards.js';
import {
  createTestDatabase,
  dropTestDatabase,
  postgresSkip,
  queryDatabase,
} from '../helpers/postgres.js';
import { ScriptProcess, runClient, startCoordinatorProcess } from '../helpers/processes.js';
import { until } from '../helpers/until.js';

const skip = postgresSkip();
const SHARDS = 8;
const procs: ScriptProcess[] = [];
const clients: DtpClient[] = [];
let database = '';

after(async () => {
  await Promise.all(clients.map((c) => c.close()));
  for (const p of procs) p.signal('SIGCONT');
  await Promise.all(procs.map((p) => p.stop(2_000)));
  if (database !== '') await dropTestDatabase(database);
});

interface Node {
  proc: ScriptProcess;
  clientPort: number;
  workerPort: number;
}

async function startNode(shards = SHARDS, more: string[] = []): Promise<Node> {
  const node = await startCoordinatorProcess([
    ...['--database', database, '--shards', String(shards)],
    ...['--lease-ttl-millis', '1000', '--lease-renew-interval-millis', '200'],
    ...more,
  ]);
  procs.push(node.proc);
  return node;
}

interface ShardsJson {
  shards: { shard: number; leader: string | null; epoch: number }[];
  coordinators: { address: string; shards: number }[];
}

function shardsOf(node: Node): ShardsJson {
  const run = runClient(node.clientPort, 'shards', '--json');
  assert.equal(run.status, 0, run.stderr);
  return JSON.parse(run.stdout) as ShardsJson;
}

/** Every shard led by one of `nodes`, each leading floor or ceil of its share. */
async function sharedOut(asked: Node, nodes: Node[]): Promise<ShardsJson> {
  const addresses = new Set(nodes.map((n) => `127.0.0.1:${n.clientPort}`));
  return until(
    () => {
      const map = shardsOf(asked);
      if (!map.shards.every((s) => s.leader !== null && addresses.has(s.leader))) return null;
      const counts = [...addresses].map((a) => map.shards.filter((s) => s.leader === a).length);
      const low = Math.floor(SHARDS / nodes.length);
      return counts.every((n) => n === low || n === low + 1) ? map : null;
    },
    { what: `the shards shared out among ${nodes.length}`, timeoutMs: 20_000, intervalMs: 100 },
  );
}

/** Every write to a shard's jobs records that shard's lease epoch and the writer's name. */
async function installAudit(): Promise<void> {
  const statements = [
    `CREATE TABLE public.write_audit (shard int, lease_epoch bigint, writer text)`,
  ];
  for (let shard = 0; shard < SHARDS; shard++) {
    statements.push(
      `CREATE FUNCTION public.audit_s${shard}() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         INSERT INTO public.write_audit
           SELECT ${shard}, epoch, current_setting('application_name') FROM dtp_s${shard}.leader_lease WHERE id = 1;
         RETURN NULL;
       END $$`,
      `CREATE TRIGGER audit AFTER INSERT OR UPDATE OR DELETE ON dtp_s${shard}.jobs
         FOR EACH STATEMENT EXECUTE FUNCTION public.audit_s${shard}()`,
    );
  }
  for (const sql of statements) await queryDatabase(database, sql);
}

describe('sharded coordinators as processes', { skip }, () => {
  it('move the shards of a killed and of a frozen coordinator, and lose nothing', async () => {
    database = await createTestDatabase();
    const a = await startNode(SHARDS, ['--http-port', '0']);
    const aHttp = `http://127.0.0.1:${(await a.proc.waitForOutput(/httpPort"?[=:](\d+)/))[1]}`;
    await sharedOut(a, [a]);
    await installAudit();
    const b = await startNode();
    const c = await startNode();
    await sharedOut(a, [a, b, c]);

    // Another shard count is refused before anything is served.
    const wrong = ScriptProcess.start('coordinator.sh', [
      ...['--bind-host', '127.0.0.1', '--worker-port', '0', '--client-port', '0'],
      ...['--database', database, '--shards', '4'],
    ]);
    procs.push(wrong);
    assert.equal(await wrong.exited, 2);
    assert.match(wrong.output, /has 8 shards/);
    // A's HTTP port: healthy, and its metrics name the shards it leads.
    const health = await until(
      async () => {
        const res = await fetch(`${aHttp}/healthz`);
        return res.status === 200 ? ((await res.json()) as { role: string; led: number[] }) : null;
      },
      { what: "A's /healthz 200" },
    );
    assert.equal(health.role, 'sharded');
    const metrics = await (await fetch(`${aHttp}/metrics`)).text();
    assert.match(metrics, /^dtp_shard_leader\{shard="0"\} [01]$/m);

    const client = await DtpClient.connect({
      host: [a, b, c].map((n) => `127.0.0.1:${n.clientPort}`).join(','),
      port: a.clientPort,
    });
    clients.push(client);
    const queues = Array.from({ length: 32 }, (_, i) => `tenant-${i}`);
    assert.equal(new Set(queues.map((q) => shardOfQueue(q, SHARDS))).size, SHARDS);
    const submitted: string[] = [];
    const submitRound = async (): Promise<void> => {
      for (const queue of queues)
        submitted.push((await client.submit('ECHO', {}, { queue })).jobId);
    };
    await submitRound();

    await b.proc.kill();
    await sharedOut(a, [a, c]);
    await submitRound();

    c.proc.signal('SIGSTOP');
    await sharedOut(a, [a]);
    await submitRound();
    c.proc.signal('SIGCONT');
    await sharedOut(a, [a, c]);

    const viaC = await DtpClient.connect({ host: '127.0.0.1', port: c.clientPort });
    clients.push(viaC);
    for (const id of submitted) assert.equal((await viaC.status(id)).state, 'QUEUED');

    // Each write was made under the epoch current for its shard; a writer names its epoch.
    const audit = await queryDatabase<{ shard: number; lease_epoch: string; writer: string }>(
      database,
      'SELECT shard, lease_epoch, writer FROM public.write_audit',
    );
    assert.ok(audit.length > 0);
    for (const row of audit) {
      const written = /-writer-e(\d+)$/.exec(row.writer);
      if (written === null) continue; // purge and other non-term writers
      assert.equal(written[1], String(row.lease_epoch), `shard ${row.shard}: ${row.writer}`);
    }
  });
});
