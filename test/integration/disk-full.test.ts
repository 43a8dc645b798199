/**
 * A real full disk: the database on a small tmpfs that this test mounts
 * (root only). Submissions fill it until a commit fails; from then on every
 * request gets ERROR STORE_FAILED and nothing unacknowledged is claimed. After
 * the tmpfs is given room and the coordinator restarted, every job that was
 * acknowledged is there with its payload, and new work is accepted again.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { RawClient } from '../helpers/raw-peers.js';
import { startCoordinator, tempDir } from '../helpers/test-coordinator.js';

function tmpfsUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'not root: cannot mount a tmpfs, disk-full test skipped';
  return null;
}

describe('a full disk under the database (tmpfs)', { skip: tmpfsUnavailable() ?? false }, () => {
  const temp = tempDir('dtp-diskfull-');
  const mountPoint = join(temp.dir, 'small');
  let mounted = false;
  after(() => {
    if (mounted) execFileSync('umount', ['-l', mountPoint]);
    rmSync(temp.dir, { recursive: true, force: true });
  });

  it('stops with STORE_FAILED, loses no acknowledged job, and recovers once there is room', async (t) => {
    mkdirSync(mountPoint);
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=3m', 'tmpfs', mountPoint]);
      mounted = true;
    } catch (err) {
      t.skip(`cannot mount a tmpfs here: ${String(err)}`);
      return;
    }
    const databasePath = join(mountPoint, 'coordinator.db');
    const first = await startCoordinator({ databasePath, maxActiveJobs: 100_000 });
    const c = await RawClient.connect(first.coordinator.clientPort);
    const acknowledged = new Map<string, string>();
    let failure: { code: string | null; message: string } | null = null;
    for (let i = 0; i < 400 && failure === null; i++) {
      const text = `${i}:`.padEnd(100_000, String.fromCharCode(97 + (i % 26)));
      const reply = await c.request({
        type: 'SUBMIT_JOB',
        taskType: 'SHA256',
        payload: { text },
        maxAttempts: null,
        idempotencyKey: `fill-${i}`,
        priority: null,
      });
      if (reply.type === 'JOB_SUBMITTED') acknowledged.set(reply.jobId, text);
      else if (reply.type === 'ERROR') failure = { code: reply.code, message: reply.message };
      else assert.fail(`unexpected ${reply.type}`);
    }
    assert.ok(failure !== null, 'the disk never filled up');
    assert.equal(failure.code, 'STORE_FAILED');
    assert.match(failure.message, /full|SQLITE_FULL/i);
    assert.ok(acknowledged.size > 3, `only ${acknowledged.size} jobs fitted`);
    // Everything after the failure gets the same error, on this and a new connection.
    const later = await c.request({ type: 'LIST_WORKERS' }).catch(() => null);
    assert.ok(later === null || (later.type === 'ERROR' && later.code === 'STORE_FAILED'));
    await c.close();
    await first.close().catch(() => undefined);

    execFileSync('mount', ['-o', 'remount,size=64m', mountPoint]);
    const second = await startCoordinator({ databasePath, maxActiveJobs: 100_000 });
    try {
      const d = await RawClient.connect(second.coordinator.clientPort);
      for (const jobId of acknowledged.keys()) {
        const job = await d.status(jobId);
        assert.equal(job.state, 'QUEUED', `acknowledged job ${jobId} lost`);
      }
      // Idempotency keys survived too: resubmitting gives the same job back.
      const [someId, someText] = [...acknowledged.entries()][0] as [string, string];
      const again = await d.request({
        type: 'SUBMIT_JOB',
        taskType: 'SHA256',
        payload: { text: someText },
        maxAttempts: null,
        idempotencyKey: 'fill-0',
        priority: null,
      });
      assert.ok(again.type === 'JOB_SUBMITTED' && again.jobId === someId);
      await d.submit('SHA256', { text: 'room again' });
      await d.close();
    } finally {
      await second.close();
    }
  });
});
