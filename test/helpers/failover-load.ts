/**
 * A keyed load generator for the failover test, run as a process of its own:
 *
 *   node dist/test/helpers/failover-load.js --hosts h1:p1,h2:p2 [--concurrency 8]
 *
 * Submits SHA256 jobs with idempotency keys through the client library
 * (which follows the leader), as fast as they are acknowledged, until a line
 * `stop` arrives on stdin (or 120 s pass). A submission that fails is sent
 * again with the same key until it is acknowledged; a key acknowledged with
 * two different job ids is recorded. Then it waits for every acknowledged
 * job and prints one JSON summary line on stdout.
 */
import { createHash } from 'node:crypto';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { setTimeout as sleepMs } from 'node:timers/promises';
import { DtpClient } from '../../src/client/client.js';
import { describeError } from '../../src/protocol/errors.js';

const { values } = parseArgs({
  options: {
    hosts: { type: 'string' },
    concurrency: { type: 'string', default: '8' },
    'max-seconds': { type: 'string', default: '120' },
  },
});
const hosts = values.hosts ?? '';
const concurrency = Number(values.concurrency);
const deadlineMs = Date.now() + Number(values['max-seconds']) * 1_000;

const client = await DtpClient.connect({ host: hosts, port: 7071, followTimeoutMs: 15_000 });
let stopping = false;
createInterface({ input: process.stdin }).on('line', (line) => {
  if (line.trim() === 'stop') stopping = true;
});

const acked = new Map<string, string>();
const duplicateKeys: string[] = [];
const errors: string[] = [];
let next = 0;
let resends = 0;

const textOf = (i: number): string => `failover-${i}`;

async function submitUntilAcked(i: number): Promise<void> {
  const key = `fo-${i}`;
  for (;;) {
    try {
      const { jobId } = await client.submit({
        taskType: 'SHA256',
        payload: { text: textOf(i) },
        idempotencyKey: key,
      });
      const earlier = acked.get(key);
      if (earlier !== undefined && earlier !== jobId) duplicateKeys.push(key);
      acked.set(key, jobId);
      // Acknowledged keys are sent once more now and then: the same job must come back.
      if (i % 10 === 0 && earlier === undefined) continue;
      return;
    } catch (err) {
      resends++;
      if (errors.length < 20) errors.push(`${key}: ${describeError(err)}`);
      if (Date.now() > deadlineMs) return;
      await sleepMs(20);
    }
  }
}

await Promise.all(
  Array.from({ length: concurrency }, async () => {
    while (!stopping && Date.now() < deadlineMs) await submitUntilAcked(next++);
  }),
);

const notCompleted: string[] = [];
const wrong: string[] = [];
let completed = 0;
let maxAttempts = 0;
const entries = [...acked.entries()];
await Promise.all(
  Array.from({ length: concurrency }, async () => {
    for (let entry = entries.pop(); entry !== undefined; entry = entries.pop()) {
      const [key, jobId] = entry;
      const i = Number(key.slice(3));
      try {
        const job = await client.wait(jobId, 60_000);
        const expected = createHash('sha256').update(textOf(i)).digest('hex');
        if (job.state !== 'COMPLETED') notCompleted.push(`${jobId} ${job.state} ${job.error}`);
        else if (job.result !== expected) wrong.push(jobId);
        else completed++;
        maxAttempts = Math.max(maxAttempts, job.attempts);
      } catch (err) {
        notCompleted.push(`${jobId}: ${describeError(err)}`);
      }
    }
  }),
);
await client.close();
process.stdout.write(
  `${JSON.stringify({
    acked: acked.size,
    completed,
    resends,
    maxAttempts,
    duplicateKeys,
    notCompleted: notCompleted.slice(0, 20),
    notCompletedCount: notCompleted.length,
    wrong,
    errors,
  })}\n`,
);
process.exit(0);
