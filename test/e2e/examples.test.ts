/**
 * The examples run as documented: a worker loads
 * examples/file-checksum/tasks.mjs through `worker.sh --tasks`, and
 * examples/file-checksum/client.mjs submits checksum jobs and prints their
 * results, including the files it may not read.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ROOT, ScriptProcess, startCoordinatorProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/test-coordinator.js';

const HOST = '127.0.0.1';
const EXAMPLE = join(ROOT, 'examples', 'file-checksum');

describe('examples/file-checksum', () => {
  const temp = tempDir('dtp-e2e-example-');
  const procs: ScriptProcess[] = [];
  after(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    temp.remove();
  });

  it('checksums the files a client names, and refuses missing files and paths outside its root', async () => {
    const files = join(temp.dir, 'files');
    mkdirSync(join(files, 'sub'), { recursive: true });
    const contents = { 'a.txt': 'hello\n', 'sub/b.bin': 'x'.repeat(100_000) };
    for (const [name, text] of Object.entries(contents)) writeFileSync(join(files, name), text);

    const c = await startCoordinatorProcess(['--database', ':memory:']);
    procs.push(c.proc);
    const worker = ScriptProcess.start(
      'worker.sh',
      [
        ...['--coordinator-host', HOST, '--coordinator-port', String(c.workerPort)],
        ...['--id', 'example-w', '--tasks', join(EXAMPLE, 'tasks.mjs')],
      ],
      { env: { CHECKSUM_ROOT: files } },
    );
    procs.push(worker);
    await c.proc.waitForOutput(/worker registered workerId=example-w/);

    const client = spawnSync(
      'node',
      [
        join(EXAMPLE, 'client.mjs'),
        ...['--host', HOST, '--port', String(c.clientPort)],
        ...['a.txt', 'sub/b.bin', 'missing.txt', '../outside.txt'],
      ],
      { cwd: temp.dir, encoding: 'utf8', timeout: 60_000 },
    );
    assert.equal(client.status, 1, 'some files failed: exit 1');
    const sha = (text: string) => createHash('sha256').update(text).digest('hex');
    assert.deepEqual(client.stdout.trim().split('\n'), [
      `${sha(contents['a.txt'])}  a.txt  (6 bytes, sha256)`,
      `${sha(contents['sub/b.bin'])}  sub/b.bin  (100000 bytes, sha256)`,
      'FAILED  missing.txt: no such file: missing.txt',
      'FAILED  ../outside.txt: ../outside.txt is outside the files this worker serves',
    ]);
    await worker.waitForOutput(/hashing .*path=a\.txt/);
  });
});
