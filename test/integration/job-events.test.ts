/**
 * Job events for clients, in-process: `client.watch` gives the job now,
 * then its changes, and ends when it is terminal; `client.events` filters by
 * task type and queue; a subscriber that never reads costs the coordinator
 * bounded memory and delays nobody; a watch survives a coordinator restart;
 * bad filters and unauthenticated subscriptions get typed errors.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DtpClient, type WatchEvent } from '../../src/client/index.js';
import type { NetEvent } from '../../src/net/net-events.js';
import { encodeTextFrame as encodeFrame } from '../../src/protocol/framing.js';
import { RawClient } from '../helpers/raw-peers.js';
import {
  startCoordinator,
  startTaskWorker,
  tempDir,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

async function collect(items: AsyncIterable<WatchEvent>, limit = 1_000): Promise<WatchEvent[]> {
  const out: WatchEvent[] = [];
  for await (const item of items) {
    out.push(item);
    if (out.length >= limit) break;
  }
  return out;
}

describe('job events for clients', { timeout: 60_000 }, () => {
  let tc: TestCoordinator;
  let client: DtpClient;
  let worker: { close(): Promise<void> };

  before(async () => {
    tc = await startCoordinator();
    client = await DtpClient.connect({ host: '127.0.0.1', port: tc.coordinator.clientPort });
    worker = await startTaskWorker(tc.coordinator.workerPort, 'w-events', { capacity: 2 });
    await tc.waitForEvent('worker.registered');
  });
  after(async () => {
    await worker.close();
    await client.close();
    await tc.close();
  });

  it('watch: the job now, each change, and the end', async () => {
    const { jobId } = await client.submit({
      taskType: 'progress.steps',
      payload: { steps: 3, stepMs: 300 },
    });
    const items = await collect(client.watch(jobId));
    assert.equal(items[0]?.event, 'current');
    const last = items.at(-1);
    assert.equal(last?.job.state, 'COMPLETED');
    assert.equal(last?.event, 'state');
    assert.ok(
      items.some((i) => i.event === 'progress'),
      JSON.stringify(items.map((i) => i.event)),
    );
    // A terminal job: only `current`.
    const again = await collect(client.watch(jobId));
    assert.deepEqual(
      again.map((i) => [i.event, i.job.state]),
      [['current', 'COMPLETED']],
    );
  });

  it('events: a new job is a state event; the task type and queue filters apply', async () => {
    const seen: WatchEvent[] = [];
    const controller = new AbortController();
    const stream = client.events(
      { taskType: 'reverse', queue: 'default' },
      { signal: controller.signal },
    );
    const other: WatchEvent[] = [];
    const otherStop = new AbortController();
    const otherStream = client.events({ queue: 'elsewhere' }, { signal: otherStop.signal });
    const reading = (async () => {
      for await (const item of stream) seen.push(item);
    })();
    const otherReading = (async () => {
      for await (const item of otherStream) other.push(item);
    })();
    // Subscriptions are registered before their first event is read.
    await until(() => tc.coordinator.inspect().subscriptions === 2, { what: 'subscribed' });
    await client.submit({ taskType: 'stats.sum', payload: { values: [1] } });
    const { jobId } = await client.submit({ taskType: 'reverse', payload: { text: 'abc' } });
    await until(() => seen.some((i) => i.job.jobId === jobId && i.job.state === 'COMPLETED'), {
      what: 'completion event',
    });
    controller.abort();
    await reading;
    assert.ok(seen.every((i) => i.job.taskType === 'reverse'));
    assert.equal(seen[0]?.event, 'state');
    assert.deepEqual(other, []);
    otherStop.abort();
    await otherReading;
    await until(() => tc.coordinator.inspect().subscriptions === 0, { what: 'unsubscribed' });
  });

  it('refuses an unknown filter field with a typed error', async () => {
    const raw = await RawClient.connect(tc.coordinator.clientPort);
    raw.conn.sendFrame(
      encodeFrame(JSON.stringify({ type: 'SUBSCRIBE_JOBS', filter: { state: 'RUNNING' } })),
    );
    const reply = await raw.inbox.next(5_000);
    assert.equal(reply.type, 'ERROR');
    assert.match(JSON.stringify(reply), /not a known filter/);
    await raw.close();
    assert.equal(tc.coordinator.inspect().subscriptions, 0);
  });

  it('a subscriber that stops reading loses events, is told how many, resumes, and slows nobody', async () => {
    const drops: number[] = [];
    const onNet = (event: NetEvent): void => {
      if (event.type === 'events.dropped') drops.push(event.count);
    };
    tc.coordinator.events.on('net', onNet);
    const raw = await RawClient.connect(tc.coordinator.clientPort);
    raw.conn.send({ type: 'SUBSCRIBE_JOBS', filter: {} });
    assert.equal((await raw.inbox.next(5_000)).type, 'SUBSCRIBED');
    raw.conn.pause();
    // ~4 KiB per COMPLETED event: far beyond the subscriber's buffer and the socket's.
    const text = 'x'.repeat(4_000);
    const jobs = await Promise.all(
      Array.from({ length: 1_500 }, () =>
        client.submit({ taskType: 'reverse', payload: { text } }),
      ),
    );
    const last = jobs.at(-1)?.jobId ?? '';
    // Everyone else is served while it does not read.
    assert.equal((await client.wait(last, 30_000)).state, 'COMPLETED');
    await until(() => drops.length > 0, { what: 'a drop reported', timeoutMs: 10_000 });
    // Reading again: EVENTS_MISSED with a count, then events again.
    raw.conn.resume();
    let missed = 0;
    let after = 0;
    let nudged = false;
    const deadline = Date.now() + 30_000;
    while (!(missed > 0 && after > 0)) {
      assert.ok(Date.now() < deadline, `EVENTS_MISSED ${missed}, events after it ${after}`);
      const msg = await raw.inbox.next(10_000);
      if (msg.type === 'EVENTS_MISSED') missed += msg.missed;
      else if (missed > 0 && msg.type === 'JOB_EVENT') after++;
      if (missed > 0 && after === 0 && !nudged) {
        nudged = true; // one more change, so that an event follows the notice
        await client.submit({ taskType: 'reverse', payload: { text: 'y' } });
      }
    }
    tc.coordinator.events.off('net', onNet);
    await raw.close();
  });
});

describe('watch across a coordinator restart', { timeout: 60_000 }, () => {
  it('reconnects, reads the job again, and ends when it is terminal', async () => {
    const dir = tempDir();
    const databasePath = `${dir.dir}/dtp.db`;
    try {
      let tc = await startCoordinator({ databasePath });
      const port = tc.coordinator.clientPort;
      const workerPort = tc.coordinator.workerPort;
      const client = await DtpClient.connect({ host: '127.0.0.1', port });
      const { jobId } = await client.submit({ taskType: 'reverse', payload: { text: 'abc' } });
      const gaps: string[] = [];
      const items: WatchEvent[] = [];
      const watching = (async () => {
        for await (const item of client.watch(jobId, { onGap: (g) => gaps.push(g.reason) })) {
          items.push(item);
        }
      })();
      await until(() => items.length === 1, { what: 'current' });
      assert.equal(items[0]?.job.state, 'QUEUED');
      await tc.close();
      tc = await startCoordinator({ databasePath, clientPort: port, workerPort });
      const worker = await startTaskWorker(workerPort, 'w-after-restart');
      await watching;
      assert.ok(gaps.includes('reconnected'), JSON.stringify(gaps));
      assert.equal(items.at(-1)?.job.state, 'COMPLETED');
      await worker.close();
      await client.close();
      await tc.close();
    } finally {
      dir.remove();
    }
  });
});
