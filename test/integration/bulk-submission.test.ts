/**
 * SUBMIT_JOBS through the client library and the CLI against a real
 * coordinator: ids in order, one commit, validated and admitted whole,
 * idempotency per job, the frame bound, and v1 peers.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  DtpClient,
  RemoteError,
  RequestTooLargeError,
  SubmitRejectedError,
  UnsupportedRequestError,
} from '../../src/client/index.js';
import type { BatchJob } from '../../src/client/index.js';
import { runClientCli } from '../../src/cli/client-cli.js';
import { StrictV1Coordinator } from '../helpers/strict-v1.js';
import { startCoordinator, tempDir, type TestCoordinator } from '../helpers/test-coordinator.js';

const sha = (text: string): BatchJob => ({ taskType: 'SHA256', payload: { text } });

async function cli(port: number, ...argv: string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const code = await runClientCli([...argv, '--host', '127.0.0.1', '--port', String(port)], {
    stdout: (text) => (out += text),
    stderr: (text) => (out += text),
    env: {},
    color: false,
    interactive: false,
  });
  return { code, out };
}

describe('SUBMIT_JOBS', () => {
  let tc: TestCoordinator;
  let client: DtpClient;
  before(async () => {
    tc = await startCoordinator({ maxActiveJobs: 100 });
    client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
  });
  after(async () => {
    await client.close();
    await tc.close();
  });

  it('creates every job in the order given, in one commit', async () => {
    const jobs = [sha('a'), { taskType: 'WORD_COUNT', payload: { text: 'x y' }, maxAttempts: 2 }];
    const committedBefore = tc.events.filter((e) => e.type === 'job.submitted').length;
    const ids = await client.submitMany(jobs);
    assert.equal(ids.length, 2);
    assert.equal((await client.status(ids[0] as string)).taskType, 'SHA256');
    const second = await client.status(ids[1] as string);
    assert.equal(second.taskType, 'WORD_COUNT');
    assert.equal(second.maxAttempts, 2);
    assert.equal(tc.events.filter((e) => e.type === 'job.submitted').length, committedBefore + 2);
  });

  it('refuses the whole batch for one invalid job, naming its index', async () => {
    const active = tc.coordinator.inspect().activeCount;
    await assert.rejects(
      client.submitMany([sha('ok'), sha('ok too'), { taskType: 'SHA256', payload: { text: 7 } }]),
      (err: unknown) => {
        assert.ok(err instanceof RemoteError);
        assert.equal(err.index, 2);
        assert.match(err.message, /index 2/);
        return true;
      },
    );
    assert.equal(tc.coordinator.inspect().activeCount, active, 'nothing was created');
  });

  it('refuses a key twice in one batch, and a known key with a different submission', async () => {
    const twice = [
      { ...sha('k1'), idempotencyKey: 'dup' },
      { ...sha('k2'), idempotencyKey: 'dup' },
    ];
    await assert.rejects(client.submitMany(twice), (err: unknown) => {
      assert.ok(err instanceof RemoteError);
      assert.equal(err.index, 1);
      return true;
    });
    const single = await client.submit('SHA256', { text: 'keyed' }, { idempotencyKey: 'known' });
    const ids = await client.submitMany([
      sha('fresh'),
      { ...sha('keyed'), idempotencyKey: 'known' },
    ]);
    assert.equal(ids[1], single.jobId, 'a known key answers with its original job');
    await assert.rejects(
      client.submitMany([sha('fresh 2'), { ...sha('changed'), idempotencyKey: 'known' }]),
      (err: unknown) => {
        assert.ok(err instanceof RemoteError);
        assert.equal(err.code, 'IDEMPOTENCY_CONFLICT');
        assert.equal(err.index, 1);
        return true;
      },
    );
  });

  it('looks up keys it does not hold and answers a resubmitted batch with the same ids', async () => {
    const keyed = [
      { ...sha('n1'), idempotencyKey: 'new-1' },
      sha('unkeyed'),
      { ...sha('n2'), idempotencyKey: 'new-2' },
    ];
    const first = await client.submitMany(keyed);
    const again = await client.submitMany(keyed);
    assert.equal(again[0], first[0]);
    assert.notEqual(again[1], first[1], 'a job without a key is a new job');
    assert.equal(again[2], first[2]);
  });

  it('refuses an empty batch, more than 1,000 jobs, and a batch past the frame size locally', async () => {
    await assert.rejects(client.submitMany([]), RangeError);
    await assert.rejects(
      client.submitMany(Array.from({ length: 1_001 }, (_, i) => sha(String(i)))),
      RangeError,
    );
    const big = 'x'.repeat(2_000);
    await assert.rejects(
      client.submitMany(Array.from({ length: 600 }, () => sha(big))),
      (err: unknown) => {
        assert.ok(err instanceof RequestTooLargeError);
        assert.match(err.message, /fewer jobs per batch/);
        return true;
      },
    );
  });

  it('admits a batch whole: SUBMIT_REJECTED when its new jobs do not all fit', async () => {
    const active = tc.coordinator.inspect().activeCount;
    const room = 100 - active;
    assert.ok(room > 0 && room < 1_000, `room ${room}`);
    const jobs = Array.from({ length: room + 1 }, (_, i) => sha(`fill ${i}`));
    await assert.rejects(client.submitMany(jobs), SubmitRejectedError);
    assert.equal(tc.coordinator.inspect().activeCount, active);
  });

  it('client.sh submit-many prints the ids in order and sends more than 1,000 lines in batches', async () => {
    const { dir, remove } = tempDir();
    try {
      const file = join(dir, 'jobs.ndjson');
      const lines = Array.from({ length: 3 }, (_, i) =>
        JSON.stringify({ taskType: 'SHA256', payload: { text: `cli ${i}` }, priority: 'HIGH' }),
      );
      writeFileSync(file, `${lines.join('\n')}\n`);
      const port = tc.coordinator.clientPort;
      const run = await cli(port, 'submit-many', '--file', file, '--json');
      assert.equal(run.code, 0, run.out);
      const { jobIds } = JSON.parse(run.out) as { jobIds: string[] };
      assert.equal(jobIds.length, 3);
      assert.equal((await client.status(jobIds[2] as string)).priority, 'HIGH');
      writeFileSync(file, '{"taskType": "SHA256", "payload": {}}\nnot json\n');
      const bad = await cli(port, 'submit-many', '--file', file);
      assert.equal(bad.code, 2, bad.out);
      assert.match(bad.out, /line 2/);
    } finally {
      remove();
    }
  });
});

describe('SUBMIT_JOBS against a v1 coordinator', () => {
  it('says the coordinator does not support it, and submits nothing one by one', async () => {
    const v1 = await StrictV1Coordinator.start();
    const client = await DtpClient.connect({ host: '127.0.0.1', port: v1.clientPort });
    try {
      await assert.rejects(client.submitMany([sha('a')]), (err: unknown) => {
        assert.ok(err instanceof UnsupportedRequestError);
        assert.match(err.message, /this coordinator does not support bulk submission/);
        return true;
      });
    } finally {
      await client.close();
      await v1.close();
    }
  });
});
