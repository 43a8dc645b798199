/**
 * The client library and CLI when the caller gets something wrong, against
 * a real coordinator in-process: a request too large for a frame is refused
 * before it is sent and leaves the connection working (every request kind),
 * and the CLI says so with exit 2 before it connects.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runClientCli } from '../../src/cli/client-cli.js';
import { DtpClient } from '../../src/client/client.js';
import { RequestTooLargeError } from '../../src/client/errors.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';

/** A SHA256 text whose SUBMIT_JOB (with the knownStates our client sends) is exactly 5,243,056 bytes of JSON. */
const BIG_TEXT = 'x'.repeat(5_242_898);
const BIG_MESSAGE = 'payload too large (5,243,056 bytes; the limit is 1 MiB)';

async function cli(
  argv: string[],
  readInput: (path: string) => Promise<string> = () => Promise.reject(new Error('no input')),
): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runClientCli(argv, {
    stdout: (text) => (stdout += text),
    stderr: (text) => (stderr += text),
    env: {},
    color: false,
    interactive: false,
    readInput,
  });
  return { code, stdout, stderr };
}

describe('client misuse', () => {
  let tc: TestCoordinator;
  let client: DtpClient;
  before(async () => {
    tc = await startCoordinator();
    client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
  });
  after(async () => {
    await client.close();
    await tc.close();
  });

  it('refuses a 5 MB submission with its size, and the next submission on the client works', async () => {
    await assert.rejects(client.submit('SHA256', { text: BIG_TEXT }), (err: unknown) => {
      assert.ok(err instanceof RequestTooLargeError);
      assert.equal(err.code, 'PAYLOAD_TOO_LARGE');
      assert.equal(err.message, BIG_MESSAGE);
      assert.equal(err.bytes, 5_243_056);
      return true;
    });
    const job = await client.submit('SHA256', { text: 'abc' });
    // Its own reply came back (not one meant for the refused request).
    assert.equal(job.snapshot.taskType, 'SHA256');
    assert.equal((await client.status(job.jobId)).jobId, job.jobId);
    assert.equal(
      tc.coordinator.inspect().activeCount,
      1,
      'only the small job reached the coordinator',
    );
  });

  it('refuses every oversized request kind without disturbing requests in flight', async () => {
    const queued = await client.submit('SLEEP', { durationMillis: 1 });
    const huge = 'j'.repeat(1_100_000);
    const inFlight = client.status(queued.jobId);
    const refusals = await Promise.allSettled([
      client.status(huge),
      client.cancel(huge),
      client.wait(huge, 10),
    ]);
    for (const outcome of refusals) {
      assert.equal(outcome.status, 'rejected');
      assert.ok(outcome.reason instanceof RequestTooLargeError, String(outcome.reason));
    }
    assert.match(
      (refusals[0] as PromiseRejectedResult).reason.message as string,
      /^GET_JOB_STATUS request too large \(1,100,0\d\d bytes; the limit is 1 MiB\)$/,
    );
    assert.equal((await inFlight).jobId, queued.jobId);
    assert.equal((await client.status(queued.jobId)).jobId, queued.jobId);
  });

  it('CLI: a payload over a frame is a usage error (exit 2) said before connecting', async () => {
    // Port 1 on loopback: nothing listens, so reaching the coordinator would fail otherwise.
    const args = ['submit', 'SHA256', '--payload-file', 'big.json', '--host', '127.0.0.1'];
    const input = (): Promise<string> => Promise.resolve(JSON.stringify({ text: BIG_TEXT }));
    const human = await cli([...args, '--port', '1'], input);
    assert.equal(human.code, 2, human.stderr);
    assert.equal(human.stderr, `Error: ${BIG_MESSAGE}\n`);
    const json = await cli([...args, '--port', '1', '--json'], input);
    assert.equal(json.code, 2);
    assert.deepEqual(JSON.parse(json.stdout), {
      error: { code: 'PAYLOAD_TOO_LARGE', message: BIG_MESSAGE },
    });
  });
});
