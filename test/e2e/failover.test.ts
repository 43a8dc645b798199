/**
 * Failover for real: a private PostgreSQL, two coordinators, two workers and
 * a keyed load generator, all separate processes. Under load the leader is
 * killed with SIGKILL three times (and started again as a standby), then
 * frozen with SIGSTOP until the other took over, then resumed.
 *
 * Checked: every acknowledged job completes exactly once as the client sees
 * it (one job per key, the right result), none is lost; every committed
 * write was made under the lease epoch current at that moment (a write audit
 * kept by the database itself), so the frozen ex-leader wrote nothing after
 * it lost the lease; it stands by once resumed. Takeover times are printed.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import {
  createTestDatabase,
  dropTestDatabase,
  postgresSkip,
  queryDatabase,
} from '../helpers/postgres.js';
import { health, leads, startPgNode, type PgNode } from '../helpers/pg-nodes.js';
import { ROOT, ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const skip = postgresSkip();
const procs: ScriptProcess[] = [];
const children: ChildProcess[] = [];
let database = '';

after(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  await Promise.all(procs.map((p) => p.stop(2_000)));
  if (database !== '') await dropTestDatabase(database);
});

type Node = PgNode;

const startNode = (ports?: Omit<Node, 'proc'>): Promise<Node> =>
  startPgNode(database, procs, ports);

/** Installs a write audit: every statement writing jobs or attempts records the lease epoch and the writer. */
async function installAudit(url: string): Promise<void> {
  await queryDatabase(
    url,
    `CREATE TABLE public.write_audit (lease_epoch bigint, writer text, at timestamptz DEFAULT clock_timestamp());
     CREATE FUNCTION public.audit_write() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       INSERT INTO public.write_audit (lease_epoch, writer)
         SELECT epoch, current_setting('application_name') FROM dtp.leader_lease WHERE id = 1;
       RETURN NULL;
     END $$;
     CREATE TRIGGER audit_jobs AFTER INSERT OR UPDATE OR DELETE ON dtp.jobs
       FOR EACH STATEMENT EXECUTE FUNCTION public.audit_write();
     CREATE TRIGGER audit_attempts AFTER INSERT OR UPDATE OR DELETE ON dtp.attempts
       FOR EACH STATEMENT EXECUTE FUNCTION public.audit_write();`,
  );
}

describe('failover between two coordinators on PostgreSQL', { skip }, () => {
  it('keeps every acknowledged job through SIGKILLs and a SIGSTOP of the leader', async () => {
    database = await createTestDatabase();
    const nodes: Node[] = [await startNode()];
    let epoch = await leads(nodes[0] as Node, 0);
    await installAudit(database);
    nodes.push(await startNode());
    const workerHosts = nodes.map((n) => `127.0.0.1:${n.workerPort}`).join(',');
    const clientHosts = nodes.map((n) => `127.0.0.1:${n.clientPort}`).join(',');
    for (const id of ['w1', 'w2']) {
      const worker = ScriptProcess.start('worker.sh', [
        '--coordinator-host',
        workerHosts,
        '--id',
        id,
        '--capacity',
        '4',
        '--heartbeat-interval-millis',
        '200',
        '--reconnect-delay-millis',
        '100',
        '--log-level',
        'warn',
      ]);
      procs.push(worker);
    }
    const load = spawn(
      process.execPath,
      [join(ROOT, 'dist', 'test', 'helpers', 'failover-load.js'), '--hosts', clientHosts],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    children.push(load);
    let loadOut = '';
    load.stdout.on('data', (d: Buffer) => (loadOut += d.toString('utf8')));
    const loadDone = once(load, 'exit');

    const leaderIndex = async (): Promise<number> =>
      until(
        async () => {
          for (const [k, node] of nodes.entries())
            if ((await health(node)).status === 200) return k + 1;
          return null;
        },
        { timeoutMs: 15_000, intervalMs: 20, what: 'a leader' },
      ).then((k) => k - 1);
    const takeovers: string[] = [];
    const auditRows = async () =>
      Number(
        (
          await queryDatabase<{ n: number }>(
            database,
            'SELECT count(*)::integer AS n FROM public.write_audit',
          )
        )[0]?.n,
      );

    // Three SIGKILLs under load; the killed node comes back as a standby.
    for (let round = 1; round <= 3; round++) {
      const before = await auditRows();
      await until(async () => (await auditRows()) >= before + 20, {
        timeoutMs: 20_000,
        intervalMs: 50,
        what: 'load to reach the leader',
      });
      const k = await leaderIndex();
      const victim = nodes[k] as Node;
      const other = nodes[1 - k] as Node;
      const killedAt = performance.now();
      await victim.proc.kill();
      epoch = await leads(other, epoch);
      takeovers.push(
        `SIGKILL #${round}: ${Math.round(performance.now() - killedAt)} ms (epoch ${epoch})`,
      );
      nodes[k] = await startNode({
        workerPort: victim.workerPort,
        clientPort: victim.clientPort,
        httpPort: victim.httpPort,
      });
    }

    // A frozen leader: the other takes over; once resumed it stands by and wrote nothing meanwhile.
    const before = await auditRows();
    await until(async () => (await auditRows()) >= before + 20, {
      timeoutMs: 20_000,
      intervalMs: 50,
      what: 'load to reach the leader',
    });
    const k = await leaderIndex();
    const frozen = nodes[k] as Node;
    const frozenEpoch = epoch;
    const stoppedAt = performance.now();
    frozen.proc.signal('SIGSTOP');
    epoch = await leads(nodes[1 - k] as Node, epoch);
    takeovers.push(`SIGSTOP: ${Math.round(performance.now() - stoppedAt)} ms (epoch ${epoch})`);
    frozen.proc.signal('SIGCONT');
    await until(async () => (await health(frozen)).status === 503, {
      timeoutMs: 10_000,
      intervalMs: 20,
      what: 'the resumed ex-leader to stand by',
    });

    load.stdin.write('stop\n');
    await loadDone;
    console.log(`takeover times: ${takeovers.join('; ')}`);
    const summary = JSON.parse(loadOut.trim().split('\n').at(-1) ?? '{}') as {
      acked: number;
      completed: number;
      resends: number;
      maxAttempts: number;
      duplicateKeys: string[];
      notCompletedCount: number;
      notCompleted: string[];
      wrong: string[];
    };
    console.log(`load: ${JSON.stringify(summary)}`);
    assert.ok(summary.acked >= 100, `only ${summary.acked} jobs acknowledged`);
    assert.deepEqual(summary.duplicateKeys, []);
    assert.deepEqual(summary.wrong, []);
    assert.equal(summary.notCompletedCount, 0, summary.notCompleted.join('\n'));
    assert.equal(summary.completed, summary.acked);

    const audit = await queryDatabase<{ lease_epoch: number; writer: string; n: number }>(
      database,
      `SELECT lease_epoch::integer AS lease_epoch, writer, count(*)::integer AS n
         FROM public.write_audit GROUP BY 1, 2 ORDER BY 1, 2`,
    );
    console.log(
      `writes by epoch: ${audit.map((r) => `${r.writer}@lease ${r.lease_epoch}: ${r.n}`).join(', ')}`,
    );
    for (const row of audit) {
      assert.equal(
        row.writer,
        `dtp-writer-e${row.lease_epoch}`,
        'a write under a superseded epoch',
      );
    }
    assert.ok(
      audit.some((r) => r.lease_epoch === frozenEpoch),
      'the frozen leader had written before',
    );
  });

  it('takes the URL from --database-file or DTP_DATABASE, never shows the password, and hands over on SIGTERM', async () => {
    const url = await createTestDatabase();
    const withPassword = new URL(url);
    withPassword.password = 's3cret-pw'; // trust authentication: ignored by the server
    const { dir, remove } = tempDir();
    try {
      const file = join(dir, 'database');
      writeFileSync(file, `${withPassword.toString()}\n`);
      const common = ['--lease-ttl-millis', '2000', '--lease-renew-interval-millis', '400'];
      const a = await startCoordinatorProcess([
        '--database-file',
        file,
        '--metrics-port',
        '0',
        ...common,
      ]);
      procs.push(a.proc);
      const aHttp = Number((await a.proc.waitForOutput(/metricsPort"?[=:](\d+)/))[1]);
      const nodeA: Node = { ...a, httpPort: aHttp };
      await leads(nodeA, 0);
      const b = await startCoordinatorProcess(['--metrics-port', '0', ...common], undefined, {
        env: { DTP_DATABASE: withPassword.toString() },
      });
      procs.push(b.proc);
      const bHttp = Number((await b.proc.waitForOutput(/metricsPort"?[=:](\d+)/))[1]);
      const nodeB: Node = { ...b, httpPort: bHttp };
      assert.equal((await health(nodeB)).status, 503);
      const stoppedAt = performance.now();
      assert.equal(await a.proc.stop(), 0);
      await leads(nodeB, 1, 5_000);
      console.log(`hand-over after SIGTERM: ${Math.round(performance.now() - stoppedAt)} ms`);
      assert.equal(await b.proc.stop(), 0);
      for (const proc of [a.proc, b.proc]) {
        assert.doesNotMatch(proc.output, /s3cret-pw/);
        assert.match(proc.output, /\*\*\*/);
      }
    } finally {
      remove();
      await dropTestDatabase(url);
    }
  });
});
