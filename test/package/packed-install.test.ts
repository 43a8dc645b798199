/**
 * The package as a user gets it: `npm pack` (which builds it) in a copy of
 * the checkout, the tarball
 * installed into an empty folder by the commands of README's "Write your own
 * task", that section run as it is written (its files, its commands, its
 * TypeScript compiled with `tsc --strict` and run), and a custom task run end to end through
 * the installed commands (`dtp-coordinator`, `dtp-worker --tasks`, `dtp
 * submit`/`wait`) and the installed library (the client entry point without
 * better-sqlite3, `dtp/worker` in a task module, `dtp/coordinator` and
 * `dtp/worker` embedded in one program), and its type declarations checked
 * by the TypeScript compiler.
 *
 * It needs the npm registry (the tarball's dependencies): where `npm ping`
 * gets no answer within seconds it is skipped, saying so, unless
 * DTP_TEST_NEEDS_REGISTRY=1 (CI) makes that a failure. Every command runs in
 * a process group of its own under its own time limit, killed with all it
 * started on that limit, at the end of the tests and when this process ends;
 * the temporary folder goes at the same points.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  commandTempDir,
  killCommands,
  runCommand,
  type CommandResult,
} from '../helpers/bounded-command.js';
import {
  cleanEnv,
  ROOT,
  ScriptProcess,
  ShellProcess,
  startCoordinatorProcess,
} from '../helpers/processes.js';
import { codeBlocks, readmeSection, shellLines, type CodeBlock } from '../helpers/readme.js';
import { registryUnreachable } from '../helpers/registry.js';

const HOST = '127.0.0.1';
/** `npm pack`: the package's build (tsc and vite). */
const PACK_MS = 240_000;
/** An install from the registry, native modules compiled (a minute or two each on a busy core). */
const INSTALL_TIMEOUT_MS = 480_000;
/** Any other command (npm pkg, tsc, the dtp commands, a program). */
const COMMAND_TIMEOUT_MS = 120_000;
/** The set-up runs pack, the README's install and one more install, each bounded by its own limit. */
const SETUP_TIMEOUT_MS = PACK_MS + INSTALL_TIMEOUT_MS + COMMAND_TIMEOUT_MS + 60_000;

const offline = registryUnreachable();
const skip =
  offline !== null && process.env.DTP_TEST_NEEDS_REGISTRY !== '1'
    ? `${offline}: the packed package cannot be installed here`
    : false;

function run(
  command: string,
  args: string[],
  cwd: string,
  timeoutMs = COMMAND_TIMEOUT_MS,
  extraEnv: NodeJS.ProcessEnv = {},
): Promise<CommandResult> {
  return runCommand(command, args, { cwd, env: cleanEnv(extraEnv), timeoutMs });
}

/** A README command line run by bash in `cwd`. */
function shell(
  line: string,
  cwd: string,
  env: NodeJS.ProcessEnv = {},
  timeoutMs = COMMAND_TIMEOUT_MS,
): Promise<CommandResult> {
  return run('bash', ['-e', '-c', line], cwd, timeoutMs, env);
}

/**
 * A copy of the checkout as a clone has it (no dist/, data or logs), its
 * dependencies linked: `npm pack` there builds the copy's own dist/. The
 * checkout's dist/ stays as it is for the tests that run beside this one
 * and start their processes from it.
 */
async function copyOfCheckout(dir: string): Promise<string> {
  mkdirSync(dir);
  const skipped = ['node_modules', 'dist', 'data', 'demo-logs', '.venv', '.git'];
  const excludes = skipped.map((name) => `--exclude=./${name}`).join(' ');
  const copy = `tar -C "$1" ${excludes} -cf - . | tar -C "$2" -xf -`;
  ok(await run('bash', ['-c', copy, 'copy', ROOT, dir], ROOT), 'a copy of the checkout');
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

function ok(result: CommandResult, what: string): string {
  const how = result.timedOut ? 'killed at its time limit' : String(result.status);
  assert.equal(result.status, 0, `${what} failed (${how}):\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

/** The module of README's "Write your own task", and a task that cannot work. */
const TASKS_MODULE = `
import { defineTask, defineTasks, NonRetryableError } from 'dtp/worker';
import { z } from 'zod';

export default defineTasks({
  'text.slugify': defineTask({
    schema: z.object({ title: z.string().min(1).max(200) }),
    run: ({ title }, ctx) => {
      ctx.log.info('slugifying', { chars: title.length });
      return {
        slug: title
          .toLowerCase()
          .replace(/[^a-z0-9]+/g, '-')
          .replace(/^-|-$/g, ''),
      };
    },
  }),
  'never.works': async () => {
    throw new NonRetryableError('not today');
  },
});
`;

const TS_MODULE = (name: string) => `
import { defineTask, defineTasks, type TaskContext } from 'dtp/worker';
import { z } from 'zod';

const Payload = z.object({ name: z.string() });

export default defineTasks({
  '${name}': defineTask({
    schema: Payload,
    run: ({ name }: z.infer<typeof Payload>, ctx: TaskContext): string =>
      \`hello \${name} from TypeScript, attempt \${ctx.attemptNumber}\`,
  }),
});
`;

/** The documented way to load TypeScript on Node 20, where task threads do not run `--import` loaders. */
const TS_ENTRY = `
import { register } from 'tsx/esm/api';

register();
const { default: tasks } = await import('./greeting.ts');
export default tasks;
`;

const CLIENT_PROGRAM = `
import { createRequire } from 'node:module';
import { JobFailedError, connect } from 'dtp';

const loaded = Object.keys(createRequire(import.meta.url).cache).filter((p) => p.includes('better-sqlite3'));
const client = await connect({ host: '127.0.0.1', port: Number(process.argv[2]) });
const job = await client.submit('text.slugify', { title: 'Hi there' });
const value = await job.result({ timeoutMs: 30_000 });
const snapshot = await job.status();
let failed = null;
try {
  await (await client.submit('never.works', {})).result({ timeoutMs: 30_000 });
} catch (err) {
  if (!(err instanceof JobFailedError)) throw err;
  failed = err.job;
}
await client.close();
console.log(JSON.stringify({ loaded, value, snapshot, failed }));
`;

const EMBEDDED_PROGRAM = `
import { DtpClient } from 'dtp/client';
import { startCoordinator } from 'dtp/coordinator';
import { startWorker } from 'dtp/worker';

const coordinator = await startCoordinator({ workerPort: 0, clientPort: 0, bindHost: '127.0.0.1',
  databasePath: ':memory:', heartbeatTimeoutMs: 2000, sweepIntervalMs: 20 });
const worker = await startWorker({ coordinatorHost: '127.0.0.1', coordinatorPort: coordinator.workerPort,
  tasks: ['./tasks.mjs'], heartbeatIntervalMs: 100 });
const client = await DtpClient.connect({ host: '127.0.0.1', port: coordinator.clientPort });
const job = await client.wait((await client.submit('text.slugify', { title: 'Embedded' })).jobId, 30_000);
let refused = null;
try { await startCoordinator({ maxAttempts: 0 }); } catch (err) { refused = err.message; }
await client.close();
await worker.close();
await coordinator.close();
console.log(JSON.stringify({ job, refused }));
`;

const TYPE_CHECK = `
import { connect, DtpClient, type JobSnapshot } from 'dtp';
import { startCoordinator, type StartCoordinatorOptions } from 'dtp/coordinator';
import { defineTask, startWorker, type TaskContext } from 'dtp/worker';
import type greeting from './greeting.js';

const options: StartCoordinatorOptions = { workerPort: 0, maxAttempts: 2 };
const task = defineTask({ run: (payload: { n: number }, ctx: TaskContext) => payload.n + ctx.attemptNumber });
export async function check(): Promise<JobSnapshot['state']> {
  const c = await startCoordinator(options);
  const w = await startWorker({ coordinatorPort: c.workerPort });
  const client = await DtpClient.connect({ host: 'localhost', port: c.clientPort });
  const n: number = await task.run({ n: 1 }, {} as TaskContext);
  // Typed from the module by a type-only import: payload and result.
  const typed = await connect<typeof greeting>({ host: 'localhost', port: c.clientPort });
  const text: string = await (await typed.submit('ts.greet', { name: 'typed' })).result();
  // @ts-expect-error the payload must fit the task's schema
  await typed.submit('ts.greet', { name: 42 });
  await Promise.all([w.close(), c.close(), typed.close()]);
  return (await client.status(String(n) + text)).state;
}
`;

/** README's "Write your own task" and "The client library", their code blocks in order. */
const OWN_TASK = codeBlocks(readmeSection(ROOT, 'Write your own task'));
const LIBRARY = codeBlocks(readmeSection(ROOT, 'The client library'));
const README_TARBALL = '/path/to/dtp-0.1.0.tgz';

describe('the packed package, installed into an empty folder', { skip }, () => {
  let temp: { dir: string; remove: () => void } | null = null;
  let app = '';
  const procs: ScriptProcess[] = [];
  const servers: ShellProcess[] = [];
  let tarball = '';
  let installOutput = '';

  before(
    async () => {
      assert.equal(offline, null, 'DTP_TEST_NEEDS_REGISTRY=1 and the registry is out of reach');
      temp = commandTempDir('dtp-package-');
      app = join(temp.dir, 'my-tasks');
      const into = temp.dir;
      const checkout = await copyOfCheckout(join(temp.dir, 'checkout'));
      const pack = run('npm', ['pack', '--pack-destination', into, '--silent'], checkout, PACK_MS);
      const packed = ok(await pack, 'npm pack');
      tarball = join(temp.dir, packed.trim().split('\n').pop() ?? '');
      // README's first block, as written (but for the tarball's path): the folder, its
      // package.json, better-sqlite3's install script approved, dtp and zod installed.
      const setup = OWN_TASK[0];
      assert.ok(setup?.lang === 'sh' && setup.text.includes(README_TARBALL), 'the install block');
      const lines = setup.text.replace(README_TARBALL, tarball);
      const install = await shell(lines, temp.dir, {}, INSTALL_TIMEOUT_MS);
      installOutput = ok(install, "README's install commands") + install.stderr;
      const extra = ['install', 'tsx@^4', '--prefer-offline', '--no-audit', '--no-fund'];
      ok(await run('npm', extra, app, COMMAND_TIMEOUT_MS), 'npm install tsx');
      writeFileSync(join(app, 'tasks.mjs'), TASKS_MODULE);
      writeFileSync(join(app, 'client.mjs'), CLIENT_PROGRAM);
      writeFileSync(join(app, 'embedded.mjs'), EMBEDDED_PROGRAM);
      writeFileSync(join(app, 'greeting.ts'), TS_MODULE('ts.greet'));
      writeFileSync(join(app, 'direct.ts'), TS_MODULE('ts.direct'));
      writeFileSync(join(app, 'greeting-entry.mjs'), TS_ENTRY);
    },
    { timeout: SETUP_TIMEOUT_MS },
  );
  after(async () => {
    // A command the runner's timeout cut short is still running: it goes first.
    killCommands();
    await Promise.all([...procs.map((p) => p.stop()), ...servers.map((s) => s.stop())]);
    temp?.remove();
  });

  it('runs README\'s "Write your own task" as written, TypeScript included', async () => {
    assert.doesNotMatch(installOutput, /allowScripts/, 'no warning about install scripts');
    // README's way to approve the install script afterwards: the approval is recorded again.
    ok(await shell('npm pkg delete allowScripts', app), 'npm pkg delete allowScripts');
    ok(
      await shell('npm install-scripts approve better-sqlite3', app),
      'npm install-scripts approve',
    );
    const { allowScripts } = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as {
      allowScripts?: Record<string, unknown>;
    };
    const approved = Object.entries(allowScripts ?? {}).filter(([k]) =>
      k.includes('better-sqlite3'),
    );
    assert.deepEqual(
      approved.map(([, v]) => v),
      [true],
      `allowScripts after the approval: ${JSON.stringify(allowScripts)}`,
    );
    const ports = { worker: 0, client: 0 };
    const clientEnv = () => ({ DTP_HOST: HOST, DTP_PORT: String(ports.client) });
    let jobId = '';
    const write = (block: CodeBlock): void => {
      // The snippets connect to the default client port; the test's coordinator has its own.
      writeFileSync(
        join(app, block.file ?? ''),
        block.text.replace('port: 7071', `port: ${ports.client}`),
      );
    };
    const runLine = async (line: string): Promise<void> => {
      if (line.startsWith('npx dtp-coordinator ')) {
        // Flags fall back to DTP_* variables: ephemeral ports on the loopback.
        const env = { DTP_BIND_HOST: HOST, DTP_WORKER_PORT: '0', DTP_CLIENT_PORT: '0' };
        const c = ShellProcess.start(line, { cwd: app, env });
        servers.push(c);
        const m = await c.waitForOutput(/workerPort"?[=:](\d+)[ ,]"?clientPort"?[=:](\d+)/);
        [ports.worker, ports.client] = [Number(m[1]), Number(m[2])];
        return;
      }
      if (line.startsWith('npx dtp-worker ')) {
        const env = { DTP_COORDINATOR_HOST: HOST, DTP_COORDINATOR_PORT: String(ports.worker) };
        servers.push(ShellProcess.start(line, { cwd: app, env }));
        await servers[0]?.waitForOutput(/worker registered/);
        return;
      }
      const out = ok(await shell(line.replace('<job-id>', jobId), app, clientEnv()), line);
      if (line.startsWith('npx dtp submit ')) jobId = /ID:\s+(\S+)/.exec(out)?.[1] ?? '';
      if (line.startsWith('npx dtp wait ')) assert.match(out, /Result:\s+\{"slug":"hello-world"\}/);
      if (line === 'node client.js') assert.equal(out, "{ slug: 'hi-there' }\n");
      if (line.startsWith('node build/client.js')) assert.equal(out, 'hi-there\n');
    };
    for (const block of OWN_TASK.slice(1)) {
      if (block.file !== null) write(block);
      else if (block.lang === 'sh') for (const line of shellLines(block)) await runLine(line);
    }
    assert.ok(jobId !== '', 'submit printed the job id');
    assert.ok(existsSync(join(app, 'build', 'client.js')), 'tsc compiled client.ts');

    // "The client library": its TypeScript compiles against the same module and runs.
    const report = LIBRARY.find((b) => b.file === 'report.ts');
    assert.ok(report !== undefined, 'the client library example');
    write(report);
    const tsc =
      'npx tsc --strict --module nodenext --target es2022 --allowJs --outDir build report.ts';
    ok(await shell(tsc, app), 'tsc report.ts');
    assert.equal(ok(await shell('node build/report.js', app), 'report.js'), 'notes\n');
  });

  it('ships the built code, declarations and commands, and no tests', async () => {
    const files = ok(await run('tar', ['-tzf', tarball], app), 'tar')
      .split('\n')
      .filter(Boolean);
    for (const expected of [
      'package/bin/dtp.mjs',
      'package/bin/dtp-worker.mjs',
      'package/bin/dtp-coordinator.mjs',
      'package/dist/src/client/index.js',
      'package/dist/src/client/index.d.ts',
      'package/dist/src/worker/index.d.ts',
      'package/dist/src/coordinator/index.d.ts',
    ]) {
      assert.ok(files.includes(expected), `${expected} is missing`);
    }
    const tests = files.filter(
      (f) => /^package\/(dist\/)?(test|bench)\//.test(f) || f.endsWith('.test.js'),
    );
    assert.deepEqual(tests, []);
    assert.ok(
      files.every((f) => !f.startsWith('package/src/')),
      'no TypeScript sources',
    );
  });

  it('runs a custom task through the installed commands and library', async () => {
    const bin = (name: string) => join(app, 'node_modules', '.bin', name);
    const c = await startCoordinatorProcess(['--database', ':memory:'], undefined, {
      script: bin('dtp-coordinator'),
      cwd: app,
    });
    procs.push(c.proc);
    const worker = ScriptProcess.start(
      bin('dtp-worker'),
      [
        '--coordinator-host',
        HOST,
        '--coordinator-port',
        String(c.workerPort),
        '--id',
        'packed-w',
        '--tasks',
        './tasks.mjs',
      ],
      { cwd: app },
    );
    procs.push(worker);
    await c.proc.waitForOutput(/worker registered workerId=packed-w/);

    const cli = (...args: string[]) =>
      run(bin('dtp'), [...args, '--host', HOST, '--port', String(c.clientPort)], app);
    const jobId = ok(
      await cli('submit', 'text.slugify', '--payload', '{"title":"Hello, World!"}', '--quiet'),
      'dtp submit',
    ).trim();
    const waited = JSON.parse(ok(await cli('wait', jobId, '--json'), 'dtp wait')) as {
      state: string;
      result: string;
    };
    assert.equal(waited.state, 'COMPLETED');
    assert.equal(waited.result, '{"slug":"hello-world"}');

    const out = JSON.parse(
      ok(await run('node', ['client.mjs', String(c.clientPort)], app), 'client.mjs'),
    ) as {
      loaded: string[];
      value: unknown;
      snapshot: { state: string; resultFormat: string };
      failed: { state: string; attempts: number; error: string };
    };
    assert.deepEqual(out.loaded, [], 'the client entry point must not load better-sqlite3');
    assert.deepEqual(out.value, { slug: 'hi-there' });
    assert.deepEqual([out.snapshot.state, out.snapshot.resultFormat], ['COMPLETED', 'json']);
    assert.deepEqual(
      [out.failed.state, out.failed.attempts, out.failed.error],
      ['FAILED', 1, 'not today'],
    );
  });

  it('runs task modules written in TypeScript through tsx', async (t) => {
    const bin = (name: string) => join(app, 'node_modules', '.bin', name);
    const c = await startCoordinatorProcess(['--database', ':memory:'], undefined, {
      script: bin('dtp-coordinator'),
      cwd: app,
    });
    procs.push(c.proc);
    const workerArgs = (id: string, module: string) => [
      ...['--coordinator-host', HOST, '--coordinator-port', String(c.workerPort)],
      ...['--id', id, '--tasks', module],
    ];
    // Any Node version: a JavaScript entry that registers tsx, then imports the .ts module.
    procs.push(
      ScriptProcess.start(bin('dtp-worker'), workerArgs('ts-entry', './greeting-entry.mjs'), {
        cwd: app,
      }),
    );
    const types: string[] = ['ts.greet'];
    // Node 22 and later run `--import` loaders in worker threads too.
    const major = Number(process.versions.node.split('.')[0]);
    if (major >= 22) {
      const direct = [
        '--import',
        'tsx',
        bin('dtp-worker'),
        ...workerArgs('ts-direct', './direct.ts'),
      ];
      procs.push(ScriptProcess.start(process.execPath, direct, { cwd: app }));
      types.push('ts.direct');
    } else {
      t.diagnostic(
        `node --import tsx with a .ts module: not checked on Node ${major} (threads ignore it)`,
      );
    }
    const cli = (...args: string[]) =>
      run(bin('dtp'), [...args, '--host', HOST, '--port', String(c.clientPort)], app);
    for (const type of types) {
      const jobId = ok(
        await cli('submit', type, '--payload', '{"name":"ts"}', '--quiet'),
        'dtp submit',
      ).trim();
      const job = JSON.parse(ok(await cli('wait', jobId, '--json'), 'dtp wait')) as {
        state: string;
        result: string;
      };
      assert.deepEqual(
        [job.state, job.result],
        ['COMPLETED', 'hello ts from TypeScript, attempt 1'],
      );
    }
  });

  it('embeds a coordinator and a worker in one program through dtp/coordinator and dtp/worker', async () => {
    // Log lines (written asynchronously) may come after the program's own output.
    const lines = ok(await run('node', ['embedded.mjs'], app), 'embedded.mjs')
      .trim()
      .split('\n');
    const out = JSON.parse(lines.find((line) => line.startsWith('{"job"')) ?? '') as {
      job: { state: string; result: string };
      refused: string;
    };
    assert.equal(out.job.state, 'COMPLETED');
    assert.deepEqual(JSON.parse(out.job.result), { slug: 'embedded' });
    assert.match(
      out.refused,
      /^startCoordinator: maxAttempts must be an integer in 1\.\.1000, got 0$/,
    );
  });

  it('gives TypeScript users declarations for every entry point', async () => {
    writeFileSync(join(app, 'check.ts'), TYPE_CHECK);
    const tsconfig = {
      compilerOptions: {
        strict: true,
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        target: 'ES2022',
        noEmit: true,
        skipLibCheck: true,
        types: ['node'],
        typeRoots: [join(ROOT, 'node_modules', '@types')],
      },
      files: ['check.ts'],
    };
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify(tsconfig));
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    assert.ok(existsSync(tsc));
    ok(
      await run('node', [tsc, '-p', join(app, 'tsconfig.json')], app),
      'tsc on the installed declarations',
    );
  });
});
