import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MAX_FRAME_BYTES } from '../../src/protocol/framing.js';
import type { ClientRequest, JobList, JobSnapshot } from '../../src/protocol/messages.js';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';

const JOBS = 20_000;

describe('LIST_JOBS paging at scale', () => {
  let tc: TestCoordinator;
  let c: RawClient;
  const submitted: string[] = [];

  before(async () => {
    // Sending 12 MB of results stalls this shared process: a generous heartbeat timeout.
    tc = await startCoordinator({ maxActiveJobs: JOBS + 10, heartbeatTimeoutMs: 10_000 });
    c = await RawClient.connect(tc.coordinator.clientPort);
    // Pipelined submissions, in batches (the coordinator pauses a connection
    // with more than 1,024 unanswered requests).
    for (let start = 0; start < JOBS; start += 500) {
      for (let i = start; i < start + 500; i++) {
        c.conn.send({
          type: 'SUBMIT_JOB',
          taskType: 'SHA256',
          payload: { text: `page ${i}` },
          maxAttempts: null,
          idempotencyKey: null,
          priority: null,
        });
      }
      for (let i = start; i < start + 500; i++) {
        const reply = await c.inbox.next(30_000);
        assert.equal(reply.type, 'JOB_SUBMITTED');
        if (reply.type === 'JOB_SUBMITTED') submitted.push(reply.jobId);
      }
    }
    // Give 40 jobs results of 300 KB: pages must then end early to stay within a frame.
    const w = await ScriptedWorker.register(tc.coordinator.workerPort, 'big-results', 40);
    for (let i = 0; i < 40; i++) w.succeed(await w.assignments.next(), 'r'.repeat(300_000));
    await c.wait(submitted[39] as string);
    await w.close();
  });
  after(async () => {
    await c.close();
    await tc.close();
  });

  /** Every page through the cursors; checks each reply frame's size. */
  async function listAll(limit: number | null): Promise<{ jobs: JobSnapshot[]; pages: number }> {
    const jobs: JobSnapshot[] = [];
    let cursor: string | null = null;
    let pages = 0;
    const seen = new Set<string>();
    do {
      const request: ClientRequest = { type: 'LIST_JOBS', limit, state: null, cursor };
      const reply = (await c.request(request, 30_000)) as JobList;
      assert.equal(reply.type, 'JOB_LIST');
      const bytes = Buffer.byteLength(JSON.stringify(reply));
      assert.ok(bytes <= MAX_FRAME_BYTES, `a page of ${bytes} bytes`);
      jobs.push(...reply.jobs);
      cursor = reply.nextCursor;
      assert.ok(cursor === null || !seen.has(cursor), 'a cursor came back twice');
      if (cursor !== null) seen.add(cursor);
      pages++;
    } while (cursor !== null && pages < 10_000);
    return { jobs, pages };
  }

  it('lists every job exactly once, newest first, with pages as full as a frame allows', async () => {
    const { jobs, pages } = await listAll(null);
    assert.equal(jobs.length, JOBS);
    assert.deepEqual(
      jobs.map((j) => j.jobId),
      [...submitted].reverse(),
    );
    // Without a limit a page holds whatever fits in a frame: far more than
    // the fixed 500 of old, so a v1 client (which ignores the cursor) sees
    // as much as one frame can carry.
    assert.ok(pages < JOBS / 500, `${pages} pages`);
  });

  it('keeps every frame within 1 MiB even when a page of 10,000 is asked for', async () => {
    const { jobs, pages } = await listAll(10_000);
    assert.equal(jobs.length, JOBS);
    assert.equal(new Set(jobs.map((j) => j.jobId)).size, JOBS);
    assert.ok(pages > 2, 'the 300 KB results must have split the first pages');
  });

  it('filters by state across pages', async () => {
    let cursor: string | null = null;
    let completed = 0;
    do {
      const reply = (await c.request({
        type: 'LIST_JOBS',
        limit: 7,
        state: 'COMPLETED',
        cursor,
      })) as JobList;
      completed += reply.jobs.filter((j) => j.state === 'COMPLETED').length;
      assert.equal(reply.jobs.length, reply.jobs.filter((j) => j.state === 'COMPLETED').length);
      cursor = reply.nextCursor;
    } while (cursor !== null);
    assert.equal(completed, 40);
  });
});
