/**
 * LIST_JOBS: newest first, state filter, limit, cursor paging that sees every
 * job exactly once, and pages (and job snapshots) that never exceed one frame.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_LIST_LIMIT } from '../../src/coordinator/core/client-requests.js';
import { MAX_ERROR_CHARS } from '../../src/protocol/limits.js';
import { messageToJson } from '../../src/protocol/codec.js';
import { MAX_FRAME_BYTES } from '../../src/protocol/framing.js';
import type { ClientReply, JobSnapshot, JobState } from '../../src/protocol/messages.js';
import { CoreHarness, expectReply } from '../helpers/core-harness.js';

interface Page {
  jobs: JobSnapshot[];
  nextCursor: string | null;
  bytes: number;
}

function frameBytes(reply: ClientReply): number {
  return Buffer.byteLength(messageToJson(reply));
}

function list(
  h: CoreHarness,
  options: { limit?: number; state?: JobState; cursor?: string | null } = {},
): Page {
  const reply = expectReply(
    h.request({
      type: 'LIST_JOBS',
      limit: options.limit ?? null,
      state: options.state ?? null,
      cursor: options.cursor ?? null,
    }),
    'JOB_LIST',
  );
  return { jobs: reply.jobs, nextCursor: reply.nextCursor, bytes: frameBytes(reply) };
}

/** Follows cursors to the end; returns every page. */
function listAll(
  h: CoreHarness,
  options: { limit?: number; state?: JobState; between?: () => void } = {},
): Page[] {
  const pages: Page[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 10_000; i++) {
    const page = list(h, { ...options, cursor });
    pages.push(page);
    if (page.nextCursor === null) return pages;
    cursor = page.nextCursor;
    options.between?.();
  }
  throw new Error('paging did not end');
}

describe('core: LIST_JOBS', () => {
  it('lists newest first when no filter is given', () => {
    const h = new CoreHarness();
    const ids = [h.submit(), h.submit(), h.submit()];
    const page = list(h);
    assert.deepEqual(
      page.jobs.map((j) => j.jobId),
      [...ids].reverse(),
    );
    assert.equal(page.nextCursor, null);
  });

  it('lists only jobs in the state asked for when a state filter is given', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const done = h.submit();
    const running = h.submit();
    const queued = h.submit();
    h.result(done);
    assert.equal(h.status(running).state, 'RUNNING');
    const ids = (state: JobState): string[] => list(h, { state }).jobs.map((j) => j.jobId);
    assert.deepEqual(ids('COMPLETED'), [done]);
    assert.deepEqual(ids('RUNNING'), [running]);
    assert.deepEqual(ids('QUEUED'), [queued]);
    assert.deepEqual(ids('FAILED'), []);
  });

  it('returns at most limit jobs and a cursor when more exist', () => {
    const h = new CoreHarness();
    const ids = Array.from({ length: 5 }, () => h.submit()).reverse();
    const first = list(h, { limit: 2 });
    assert.deepEqual(
      first.jobs.map((j) => j.jobId),
      ids.slice(0, 2),
    );
    assert.notEqual(first.nextCursor, null);
    const exact = list(h, { limit: 5 });
    assert.equal(exact.jobs.length, 5);
    assert.equal(exact.nextCursor, null, 'no cursor when the page ends the list');
  });

  it('sees each of 2,500 jobs exactly once when paging with cursors', () => {
    const h = new CoreHarness();
    const ids = Array.from({ length: 2_500 }, () => h.submit());
    for (const limit of [undefined, 7, 1_000]) {
      const pages = listAll(h, { limit });
      const seen = pages.flatMap((p) => p.jobs.map((j) => j.jobId));
      assert.equal(seen.length, 2_500);
      assert.deepEqual(seen, [...ids].reverse());
      const size = limit ?? MAX_LIST_LIMIT;
      assert.equal(pages.length, Math.ceil(2_500 / size));
      for (const page of pages) assert.ok(page.jobs.length <= size);
    }
  });

  it('sees each job once when jobs change state and new ones arrive between pages', () => {
    const h = new CoreHarness();
    h.register('w1', 50);
    const ids = Array.from({ length: 300 }, () => h.submit());
    let completed = 0;
    const pages = listAll(h, {
      limit: 40,
      between: () => {
        for (const jobId of ids.slice(completed, completed + 10)) h.result(jobId);
        completed += 10;
        h.submit();
      },
    });
    const seen = pages.flatMap((p) => p.jobs.map((j) => j.jobId));
    assert.deepEqual(seen, [...ids].reverse(), 'newer submissions are not in later pages');
  });

  it('keeps every page within one frame when results and errors are large', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const jobId = h.submit();
      ids.push(jobId);
      h.result(jobId, { success: false, error: `${i}`.repeat(MAX_ERROR_CHARS * 2) });
      h.tick(1_000);
      h.result(jobId, { result: String.fromCharCode(97 + i).repeat(500 * 1024) });
    }
    const pages = listAll(h);
    assert.ok(pages.length >= 3, `${pages.length} pages`);
    for (const page of pages) {
      assert.ok(page.bytes <= MAX_FRAME_BYTES, `page of ${page.bytes} bytes`);
      assert.ok(page.jobs.length >= 1);
    }
    const seen = pages.flatMap((p) => p.jobs.map((j) => j.jobId));
    assert.deepEqual(seen, [...ids].reverse());
  });

  it('keeps a job snapshot within one frame when its result and error need JSON escapes', () => {
    const h = new CoreHarness();
    h.register('w1', 1);
    const jobId = h.submit();
    // Each control character becomes 6 bytes in JSON (\u0001).
    h.result(jobId, { success: false, error: '\u0001'.repeat(MAX_ERROR_CHARS) });
    h.tick(1_000);
    // 511 KiB of quotes: under the byte limit raw, about 1 MiB once escaped.
    h.result(jobId, { result: '"'.repeat(511 * 1024) });
    const status = h.request({ type: 'GET_JOB_STATUS', jobId });
    assert.ok(status !== undefined);
    assert.ok(frameBytes(status) <= MAX_FRAME_BYTES, `JOB_STATUS of ${frameBytes(status)} bytes`);
    for (const page of listAll(h)) {
      assert.ok(page.bytes <= MAX_FRAME_BYTES, `JOB_LIST of ${page.bytes} bytes`);
    }
  });

  for (const cursor of ['abc', '0', '-1', '01', '', '1.5', '12345678901234567']) {
    it(`answers ERROR when the cursor is malformed (${JSON.stringify(cursor)})`, () => {
      const h = new CoreHarness();
      h.submit();
      const reply = h.request({ type: 'LIST_JOBS', limit: null, state: null, cursor });
      assert.match(expectReply(reply, 'ERROR').message, /cursor/);
    });
  }

  it('answers ERROR when the limit is below 1', () => {
    const h = new CoreHarness();
    const reply = h.request({ type: 'LIST_JOBS', limit: 0, state: null, cursor: null });
    expectReply(reply, 'ERROR');
  });

  it('answers an empty last page when no job exists', () => {
    const h = new CoreHarness();
    assert.deepEqual(list(h), { jobs: [], nextCursor: null, bytes: list(h).bytes });
  });
});
