/**
 * The commands the documentation shows, run as written: the sessions of
 * test/helpers/doc-coverage.ts, each in a temporary folder of its own, every
 * command of its sections in document order, against the real coordinators
 * and workers those commands start. Every process is stopped by its process
 * group's PID at the end.
 *
 * Before a line runs, only this is replaced (docs/ARCHITECTURE.md, "Tests"):
 * - `scripts/…` → the checkout's scripts by absolute path (the folder is not a checkout),
 *   and `client.sh` at the start of a line (as running text shortens it) the same;
 * - `<job-id>` → a job the session submitted (the first; for `cancel`, the latest;
 *   the jobs of a `submit-many` only when it submits the session's first);
 *   `<token>` → the session's client token; `<command>` → `submit`;
 * - host names under `.example` → 127.0.0.1;
 * - `/etc/dtp`, `/var/lib/dtp`, `/data`, `/backups` → folders of those names in
 *   the session's folder;
 * - a `postgres://` URL → a fresh database on the test's PostgreSQL server;
 * - the HTTP ports 8080 and 9464 → 0 (a free port) on a coordinator's line, and
 *   the port that coordinator took on other lines;
 * - ` ...` standing for more flags → nothing.
 * Where a line names no host or port, DTP_* variables give the session's:
 * coordinators DTP_BIND_HOST=127.0.0.1 and ports 0, workers
 * DTP_COORDINATOR_HOST/PORT, clients DTP_HOST/DTP_PORT.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { documentedCommands, type DocCommand } from '../helpers/doc-commands.js';
import { SESSIONS, sessionCommands, type Session } from '../helpers/doc-coverage.js';
import { createTestDatabase, dropTestDatabase, postgresSkip } from '../helpers/postgres.js';
import { ROOT, ShellProcess, runLine, type LineResult } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const HOST = '127.0.0.1';
const COMMANDS = documentedCommands(ROOT);
const HELLO_SHA256 = createHash('sha256').update('hello').digest('hex');
const STARTED = /coordinator started[^\n]*workerPort"?[=:](\d+)[ ,]"?clientPort"?[=:](\d+)[^\n]*/;

type Kind = 'coordinator' | 'worker' | 'stream' | 'once' | 'shell-state';

/** What a line is, from how the document shows it. */
function kindOf(shown: string): Kind {
  const program = shown.replace(/^(\w+=\S*\s+)+/, '');
  if (/^scripts\/coordinator\.sh\b/.test(program)) return 'coordinator';
  if (/^scripts\/worker\.sh\b/.test(program)) return 'worker';
  if (/^curl -N\b/.test(program) || shown.endsWith('&')) return 'stream';
  if (/^(umask|cd|export|source|\.)\s/.test(shown)) return 'shell-state';
  return 'once';
}

interface RunningCoordinator {
  proc: ShellProcess;
  workerPort: number;
  clientPort: number;
  httpPort: number | null;
}

interface Check {
  /** Matches the command as the document shows it. */
  shown: RegExp;
  /** For a stream: the output to wait for (default: any). */
  ready?: RegExp;
  expect?: (ran: LineResult, session: DocSession) => void | Promise<void>;
}

/** What each kind of documented command must print, beyond exit status 0. */
const CHECKS: readonly Check[] = [
  {
    shown: /^scripts\/coordinator\.sh$/,
    expect: (_, s) => assert.ok(existsSync(join(s.dir, 'data', 'coordinator.db')), 'data/'),
  },
  {
    shown: /client\.sh submit (?!.*--help$)/,
    expect: (r) => match(r, /^Job submitted\n\s+ID:/),
  },
  { shown: /^scripts\/client\.sh --help$/, expect: (r) => match(r, /^Usage: client\.sh /) },
  {
    shown: /client\.sh (help <command>|<command> --help)$/,
    expect: (r) => match(r, /^Usage: client\.sh submit /),
  },
  {
    shown: /client\.sh submit sha256 --help$/,
    expect: (r) => match(r, /^Usage: client\.sh submit sha256 .*\n[^]*--text/),
  },
  {
    shown: /client\.sh queue list --json$/,
    expect: (r) => assert.ok(Array.isArray((JSON.parse(r.stdout) as { queues: unknown }).queues)),
  },
  {
    shown: /client\.sh schedule list --json$/,
    expect: (r) =>
      assert.ok(Array.isArray((JSON.parse(r.stdout) as { schedules: unknown }).schedules)),
  },
  {
    shown: /^client\.sh workers$/,
    expect: (r) => match(r, /^WORKER ID.*\n\S+\s/),
  },
  {
    shown: /client\.sh submit-many --file jobs\.ndjson$/,
    expect: (r) => match(r, /^[0-9a-f-]{36}$/m),
  },
  {
    shown: /^client\.sh watch <job-id>$/,
    // The job may still run when the watch starts: then its end arrives as an event line.
    expect: (r) => match(r, /^Job \S+\n[^]*(State:\s+COMPLETED\n| COMPLETED attempt )/),
  },
  {
    shown: /client\.sh list --state FAILED$/,
    expect: (r) => match(r, /^JOB ID\s+TYPE\s+STATE/),
  },
  { shown: /client\.sh submit sha256 --text "hello"/, expect: (r) => match(r, /Type:\s+SHA256/) },
  {
    shown: /client\.sh submit resize /,
    expect: (r) => assert.match(r.stderr, /no live worker serves task type resize/),
  },
  {
    shown: /client\.sh wait <job-id>$/,
    expect: (r) =>
      match(r, new RegExp(`State:\\s+COMPLETED\\n.*\\n\\s+Result:\\s+${HELLO_SHA256}`)),
  },
  {
    shown: /client\.sh status <job-id> --attempts$/,
    expect: (r) => match(r, /worker-\d\s.*SUCCEEDED/),
  },
  {
    shown: /client\.sh cancel <job-id>$/,
    expect: async (r, s) => {
      match(r, /^Cancelled\n.*\n.*\n.*\n\s+State:\s+CANCELLED/);
      // The `wait --exit-status` line's comment: exit 4 for a job that ended CANCELLED.
      const again = await s.runAgain(/client\.sh wait <job-id> --exit-status$/, s.jobs.at(-1));
      assert.equal(again.status, 4, again.stdout + again.stderr);
    },
  },
  {
    shown: /client\.sh submit sha256 --text "hello" --depends-on <job-id>/,
    expect: (r) => match(r, /State:\s+WAITING/),
  },
  {
    shown: /client\.sh submit-flow flow\.json --json/,
    expect: (r) => {
      const { jobs } = JSON.parse(r.stdout) as { jobs: Record<string, string> };
      assert.deepEqual(Object.keys(jobs).sort(), ['resize', 'thumbs']);
    },
  },
  { shown: /client\.sh list --state SCHEDULED$/, expect: (r) => match(r, /\bSCHEDULED\b/) },
  {
    shown: /client\.sh cancel <job-id> --json$/,
    expect: (r) => assert.equal((JSON.parse(r.stdout) as { cancelled: boolean }).cancelled, true),
  },
  {
    shown: /client\.sh schedule show heartbeat$/,
    expect: (r) =>
      match(r, /^heartbeat\s+SHA256\s+every 60000 ms.*\n\s+\S+\s+(QUEUED|RUNNING|COMPLETED)/),
  },
  { shown: /client\.sh list --state RUNNING$/, expect: (r) => match(r, /^JOB ID\s+TYPE\s+STATE/) },
  {
    shown: /^scripts\/client\.sh workers$/,
    expect: (r) => match(r, /^worker-1 .*\n^worker-2 .*\n^worker-3 /m),
  },
  { shown: /client\.sh workers .+/, expect: (r) => match(r, /^WORKER ID.*\n\S+\s+\d+\s+\d+\s/) },
  {
    shown: /client\.sh shards --host /,
    // A lone coordinator of a fresh database leads every shard under epoch 1
    // once it has taken them all (a few of its rounds after it started).
    expect: async (r, s) => {
      const all =
        /^SHARD\s+LEADER\s+EPOCH\n0\s+127\.0\.0\.1:\d+\s+1\n[^]*\nCOORDINATOR\s+SHARDS\n127\.0\.0\.1:\d+\s+16\n/;
      if (all.test(r.stdout)) return;
      let last = r;
      await until(
        async () => {
          last = await s.runAgain(/client\.sh shards --host /, undefined);
          return all.test(last.stdout);
        },
        { timeoutMs: 30_000, intervalMs: 250, what: `every shard led:\n${last.stdout}` },
      ).catch(() => match(last, all));
    },
  },
  { shown: /client\.sh purge --state COMPLETED/, expect: (r) => match(r, /^Purged 0 COMPLETED/) },
  {
    shown: /client\.sh bench --jobs 500 /,
    expect: (r) => match(r, /Completed:\s+500\n\s+Failed:\s+0 /),
  },
  { shown: /^sqlite3 /, expect: (_, s) => s.checkBackup() },
  {
    shown: /^curl -s .*\/api\/jobs\?/,
    expect: (r) => assert.ok(Array.isArray((JSON.parse(r.stdout) as { jobs: unknown }).jobs)),
  },
  { shown: /^curl -N .*\/api\/events$/, ready: /^event: overview\ndata: \{/m },
  {
    shown: /^curl -s .* -d .*\/api\/events$/,
    expect: (r) => {
      const published = JSON.parse(r.stdout) as { eventId: string; jobIds: unknown };
      assert.deepEqual([published.eventId, published.jobIds], ['psp-evt-9001', []]);
    },
  },
  { shown: /coordinator\.sh --tls-cert /, expect: (r) => match(r, /tls=on/) },
  {
    shown: /coordinator\.sh --client-token-file /,
    expect: (r) => match(r, /clientTokens=1 workerTokens=1/),
  },
  {
    shown: /coordinator\.sh --database-file /,
    expect: (r) => match(r, /database="postgres postgres:\/\/[^"]+" (.* )?advertise=127\.0\.0\.1:/),
  },
];

/**
 * Test traffic goes to the loopback only: a line that would still name another
 * address or host (`--host 10.0.0.5`) is refused before it runs. A document
 * names other machines with a host under `.example`, which the test replaces.
 */
function refuseOtherHosts(command: DocCommand, line: string): void {
  // The test's own PostgreSQL server is wherever DTP_TEST_PG_URL says.
  const dialled = line.replace(/postgres:\/\/\S+/g, '');
  const addresses = dialled.match(/\b\d{1,3}(\.\d{1,3}){3}\b/g) ?? [];
  const hosts = [...dialled.matchAll(/--(?:coordinator-host|host|advertise-host)[= ](\S+)/g)]
    .flatMap((m) => (m[1] ?? '').split(','))
    .map((h) => h.replace(/:\d+$/, ''));
  const loopback = ['127.0.0.1', 'localhost'];
  const other = [...new Set([...addresses, ...hosts])].filter((h) => !loopback.includes(h));
  if (other.length > 0) {
    const where = `${command.doc}:${command.line}`;
    throw new Error(
      `${where} names ${other.join(', ')}: the test dials only the loopback; name another machine with a host under .example`,
    );
  }
}

function match(ran: LineResult, pattern: RegExp): void {
  assert.match(ran.stdout, pattern, `${String(pattern)} not in:\n${ran.stdout}\n${ran.stderr}`);
}

/** One session: its folder, the processes its commands started, what they printed. */
class DocSession {
  readonly dir: string;
  readonly #remove: () => void;
  readonly #session: Session;
  readonly #procs: ShellProcess[] = [];
  readonly #ran: DocCommand[] = [];
  /** Lines that change the shell's state (`umask`), run again before each later line. */
  readonly #prelude: string[] = [];
  #coordinator: RunningCoordinator | null = null;
  /** Ids of the jobs submitted, in order. */
  readonly jobs: string[] = [];
  #databaseUrl = '';

  constructor(session: Session) {
    const temp = tempDir('dtp-doc-commands-');
    this.dir = temp.dir;
    this.#remove = temp.remove;
    this.#session = session;
  }

  async prepare(): Promise<void> {
    for (const folder of ['etc/dtp', 'backups'])
      mkdirSync(join(this.dir, folder), { recursive: true });
    for (const [name, text] of Object.entries(this.#session.files ?? {}))
      writeFileSync(join(this.dir, name), text);
    const needs = this.#session.needs ?? [];
    if (needs.includes('postgres')) this.#databaseUrl = await createTestDatabase();
    if (needs.includes('secrets')) {
      const made = await runLine(
        `${ROOT}/scripts/docker-entrypoint.sh init-secrets ${this.dir}/etc/dtp`,
        { cwd: this.dir },
      );
      assert.equal(made.status, 0, made.stderr);
    }
  }

  /** The line as it runs here (see the file's comment). */
  asRun(command: DocCommand, jobId?: string): string {
    const coordinatorLine = kindOf(command.text) === 'coordinator';
    let line = command.text
      .replace(/postgres:\/\/[^\s'"]+/g, () => this.#need(this.#databaseUrl, 'a database'))
      .replace(
        /(^|[\s'"=])\/(etc\/dtp|var\/lib\/dtp|data|backups)(?=[\s/'"]|$)/g,
        `$1${this.dir}/$2`,
      )
      .replace(/\b[a-z0-9-]+(\.[a-z0-9-]+)*\.example\b/gi, HOST)
      .replace(/\b(8080|9464)\b/g, () => (coordinatorLine ? '0' : String(this.#httpPort())))
      .replace(/ \.\.\.(?=\s|$)/g, '')
      .replace(/^client\.sh\b/, 'scripts/client.sh')
      .replace(/(^|[\s;&|(])scripts\//g, `$1${ROOT}/scripts/`);
    line = line.replace(/<job-id>/g, () => this.#need(jobId ?? this.#jobFor(command), 'a job'));
    line = line.replace(/<token>/g, () => this.#token());
    line = line.replace(/<command>/g, 'submit');
    const left = /<[a-z][\w-]*>/.exec(line);
    if (left !== null) throw new Error(`no value for ${left[0]} in \`${command.text}\``);
    refuseOtherHosts(command, line);
    return [...this.#prelude, line].join('; ');
  }

  async run(command: DocCommand): Promise<void> {
    const line = this.asRun(command);
    this.#ran.push(command);
    const checks = CHECKS.filter((c) => c.shown.test(command.text));
    const kind = kindOf(command.text);
    let ran: LineResult;
    if (kind === 'coordinator') ran = await this.#startCoordinator(line);
    else if (kind === 'worker') ran = await this.#startWorker(line);
    else if (kind === 'stream') {
      const proc = this.#start(line, this.#clientEnv());
      const ready = checks.find((c) => c.ready !== undefined)?.ready ?? /\S/;
      ran = {
        status: 0,
        stdout: (await proc.waitForOutput(ready, 30_000)).input ?? '',
        stderr: '',
      };
      await proc.stop();
    } else {
      ran = await runLine(line, { cwd: this.dir, env: this.#clientEnv(), timeoutMs: 60_000 });
      assert.equal(
        ran.status,
        0,
        `\`${line}\` exited ${String(ran.status)}:\n${ran.stdout}\n${ran.stderr}`,
      );
      const id = /^Job submitted\n\s+ID:\s+(\S+)/.exec(ran.stdout)?.[1];
      if (id !== undefined) this.jobs.push(id);
      // `submit-many` prints one id a line; they stand for `<job-id>` when no
      // job was submitted before (the later `cancel <job-id>` keeps its job).
      if (/client\.sh submit-many /.test(command.text) && this.jobs.length === 0)
        this.jobs.push(...(ran.stdout.match(/^[0-9a-f-]{36}$/gm) ?? []));
      if (kind === 'shell-state') this.#prelude.push(line);
    }
    for (const check of checks) await check.expect?.(ran, this);
  }

  /** Runs a line that ran before again, with `<job-id>` standing for `jobId`. */
  async runAgain(shown: RegExp, jobId: string | undefined): Promise<LineResult> {
    const before = this.#ran.find((c) => shown.test(c.text));
    assert.ok(before !== undefined, `no command like ${String(shown)} ran before`);
    return runLine(this.asRun(before, jobId), { cwd: this.dir, env: this.#clientEnv() });
  }

  /** A backup in /backups: a whole database holding the session's jobs; removed afterwards. */
  checkBackup(): void {
    const folder = join(this.dir, 'backups');
    const files = readdirSync(folder);
    assert.equal(files.length, 1, `one backup file expected: ${files.join(', ')}`);
    const file = join(folder, files[0] ?? '');
    const db = new Database(file, { readonly: true });
    try {
      assert.equal(db.pragma('integrity_check', { simple: true }), 'ok');
      const state = db.prepare('SELECT state FROM jobs WHERE job_id = ?').pluck().get(this.jobs[0]);
      assert.equal(state, 'COMPLETED');
      const count = db.prepare('SELECT count(*) FROM jobs').pluck().get() as number;
      assert.ok(count >= this.jobs.length, `${count} jobs in the backup`);
    } finally {
      db.close();
    }
    // The next line writes the same name (`VACUUM INTO` refuses an existing file);
    // opening the copy made its -wal and -shm files.
    for (const name of readdirSync(folder)) rmSync(join(folder, name));
  }

  async close(): Promise<void> {
    await this.#stopAll();
    if (this.#databaseUrl !== '') await dropTestDatabase(this.#databaseUrl);
    this.#remove();
  }

  async #stopAll(): Promise<void> {
    for (const proc of this.#procs.splice(0).reverse()) await proc.stop();
    this.#coordinator = null;
  }

  #start(line: string, env: NodeJS.ProcessEnv): ShellProcess {
    const proc = ShellProcess.start(line, { cwd: this.dir, env });
    this.#procs.push(proc);
    return proc;
  }

  async #startCoordinator(line: string): Promise<LineResult> {
    // A second coordinator line is the next step of one deployment (SECURITY's
    // TLS, then tokens): what the previous step started is stopped first.
    await this.#stopAll();
    const http = this.#session.needs?.includes('http-port') === true ? { DTP_HTTP_PORT: '0' } : {};
    const env = { DTP_BIND_HOST: HOST, DTP_WORKER_PORT: '0', DTP_CLIENT_PORT: '0', ...http };
    const proc = this.#start(line, env);
    const started = await proc.waitForOutput(STARTED);
    const httpPort = /httpPort"?[=:](\d+)/.exec(started[0])?.[1];
    this.#coordinator = {
      proc,
      workerPort: Number(started[1]),
      clientPort: Number(started[2]),
      httpPort: httpPort === undefined ? null : Number(httpPort),
    };
    return { status: 0, stdout: proc.output, stderr: '' };
  }

  async #startWorker(line: string): Promise<LineResult> {
    const c = this.#coordinator;
    assert.ok(c !== null, `\`${line}\` needs a coordinator started before it`);
    // A shard's coordinator inside a sharded one names its shard first (`shard=3`).
    const registered = () =>
      c.proc.output.match(/worker registered (shard=\d+ )?workerId=/g)?.length ?? 0;
    const before = registered();
    const id = /--id (\S+)/.exec(line)?.[1];
    const env = { DTP_COORDINATOR_HOST: HOST, DTP_COORDINATOR_PORT: String(c.workerPort) };
    const proc = this.#start(line, env);
    await until(
      () =>
        !proc.running ||
        (id === undefined
          ? registered() > before
          : new RegExp(`worker registered (shard=\\d+ )?workerId=${id} `).test(c.proc.output)),
      { timeoutMs: 30_000, what: `\`${line}\` to register` },
    );
    assert.ok(proc.running, `\`${line}\` exited:\n${proc.output}`);
    return { status: 0, stdout: proc.output, stderr: '' };
  }

  #clientEnv(): NodeJS.ProcessEnv {
    const c = this.#coordinator;
    return c === null ? {} : { DTP_HOST: HOST, DTP_PORT: String(c.clientPort) };
  }

  #httpPort(): number {
    return this.#need(this.#coordinator?.httpPort ?? null, 'a coordinator with an HTTP port');
  }

  #jobFor(command: DocCommand): string | undefined {
    return /\bcancel <job-id>/.test(command.text) ? this.jobs.at(-1) : this.jobs[0];
  }

  #token(): string {
    const file = join(this.dir, 'etc', 'dtp', 'client.tokens');
    return readFileSync(file, 'utf8').split('\n')[0]?.trim() ?? '';
  }

  #need<T extends string | number>(value: T | null | undefined, what: string): T {
    if (value === null || value === undefined || value === '')
      throw new Error(`the session has no ${what} yet`);
    return value;
  }
}

describe('the commands the documentation shows, run as written', () => {
  const open: DocSession[] = [];
  after(async () => {
    await Promise.all(open.map((s) => s.close()));
  });

  it('has a check only for commands the documents show', () => {
    const stale = CHECKS.filter((c) => !COMMANDS.some((d) => c.shown.test(d.text)));
    assert.deepEqual(
      stale.map((c) => String(c.shown)),
      [],
    );
  });

  for (const session of SESSIONS) {
    const skip = session.needs?.includes('postgres') === true ? postgresSkip() : false;
    it(`runs ${session.name}`, { skip }, async () => {
      const commands = sessionCommands(session, COMMANDS);
      assert.ok(commands.length > 0, 'the session has commands');
      const s = new DocSession(session);
      open.push(s);
      await s.prepare();
      for (const command of commands) {
        try {
          await s.run(command);
        } catch (err) {
          const why = err instanceof Error ? err.message : String(err);
          throw new Error(`${command.doc}:${command.line}: \`${command.text}\`: ${why}`, {
            cause: err,
          });
        }
      }
      open.splice(open.indexOf(s), 1);
      await s.close();
    });
  }
});
