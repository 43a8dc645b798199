/**
 * A client that receives more reply bytes than `--max-unsent-reply-bytes`
 * at once (20 waits answered with 300 KB results each) has its requests
 * paused while the replies drain, and read again once they have: the next
 * request is answered. (A drain that came while replies still waited for
 * their commit used to leave the connection paused for good.)
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/client.js';
import type { Worker } from '../../src/worker/worker.js';
import {
  startCoordinator,
  startTaskWorker,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';

const LARGE_RESULTS = fileURLToPath(new URL('../fixtures/large-results.js', import.meta.url));
const RESULT_BYTES = 300_000;

describe('unsent replies', () => {
  let tc: TestCoordinator;
  let worker: Worker;
  let client: DtpClient;
  before(async () => {
    // Not a liveness test: a stall of this process under load (coordinator,
    // worker and client share it) must not declare the worker lost and fail
    // a job of one attempt.
    tc = await startCoordinator({ heartbeatTimeoutMs: 5_000 });
    worker = await startTaskWorker(tc.coordinator.workerPort, 'big-results', {
      capacity: 4,
      tasks: [LARGE_RESULTS],
    });
    client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
  });
  after(async () => {
    await client.close();
    await worker.close();
    await tc.close();
  });

  it(
    'reads requests again once replies over the bound have drained',
    { timeout: 30_000 },
    async () => {
      const waits = await Promise.all(
        Array.from({ length: 20 }, async () => {
          const job = await client.submit('blob', { bytes: RESULT_BYTES }, { maxAttempts: 1 });
          return client.wait(job.jobId, 20_000);
        }),
      );
      const wrong = waits.filter(
        (j) => j.state !== 'COMPLETED' || j.result?.length !== RESULT_BYTES,
      );
      assert.deepEqual(
        wrong.map((j) => ({ state: j.state, error: j.error, bytes: j.result?.length })),
        [],
      );
      // The connection that took 6 MB of replies still answers.
      for (let i = 0; i < 3; i++) {
        const next = await client.submit('blob', { text: `${i}`.repeat(RESULT_BYTES) });
        assert.equal(next.snapshot.taskType, 'blob');
      }
    },
  );
});
