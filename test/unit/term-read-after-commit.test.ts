/**
 * A read marked `afterCommit` (the next window of delayed jobs) runs only
 * once every batch produced before it, and its own input's, has committed:
 * a far delayed job whose batch is still committing is then in what it sees.
 * Any other read runs at once.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CoordinatorCore } from '../../src/coordinator/core/core.js';
import type { CoreInput, Effect } from '../../src/coordinator/core/types.js';
import { Term, type TermOutlets } from '../../src/coordinator/term/term.js';
import type { StoreHandle } from '../../src/store/open-store.js';
import type { StoreRead, StoreReadResult, WriteBatch } from '../../src/store/store.js';
import { until } from '../helpers/until.js';
import { silentLogger } from '../helpers/logger.js';

const WINDOW_READ: StoreRead = {
  op: 'scheduledWindow',
  after: { atMs: 0, seq: 0 },
  untilMs: 1_000,
  limit: 10,
};
const STATUS_READ: StoreRead = { op: 'job', jobId: 'j1', withAttempts: false };

describe('Term: reads after commit', () => {
  it('runs an afterCommit read only once the batches before it committed; another read at once', async () => {
    const log: string[] = [];
    const commits: (() => void)[] = [];
    let batchId = 0;
    let pendingWrite = false;
    const core = {
      handle(input: CoreInput): Effect[] {
        if (input.kind === 'clientRequest') {
          pendingWrite = true; // a far job's insert, say
          return [];
        }
        if (input.kind === 'wake') {
          return [
            { kind: 'read', readId: 1, read: WINDOW_READ, afterCommit: true },
            { kind: 'read', readId: 2, read: STATUS_READ },
          ];
        }
        if (input.kind === 'readDone') log.push(`answered ${input.readId}`);
        return [];
      },
      takeBatch(): WriteBatch | null {
        if (!pendingWrite) return null;
        pendingWrite = false;
        return { batchId: ++batchId, jobs: [], attempts: [] };
      },
    } as unknown as CoordinatorCore;
    const store = {
      description: 'gated',
      commit(batch: WriteBatch): Promise<void> {
        log.push(`commit ${batch.batchId} started`);
        return new Promise((resolve) =>
          commits.push(() => {
            log.push(`commit ${batch.batchId} done`);
            resolve();
          }),
        );
      },
      read(read: StoreRead): Promise<StoreReadResult> {
        log.push(`read ${read.op}`);
        return Promise.resolve({ op: 'job', job: null, attempts: null });
      },
    };
    const handle = { store, close: () => Promise.resolve() } as unknown as StoreHandle;
    const noop = (): void => undefined;
    const outlets: TermOutlets = {
      send: noop,
      reply: noop,
      staged: noop,
      held: noop,
      close: noop,
      hasClient: () => true,
      push: noop,
      publish: noop,
      committed: noop,
      fail: noop,
    };
    const term = new Term({
      handle,
      core,
      epoch: null,
      lease: null,
      leaderFields: null,
      sweepIntervalMs: 60_000,
      outlets,
      log: silentLogger(),
    });
    // A write (batch 1) is committing when the window read is asked for.
    term.dispatch({
      kind: 'clientRequest',
      connId: 1,
      requestId: 1,
      msg: { type: 'GET_JOB_STATUS', jobId: 'x' },
    });
    await until(() => log.includes('commit 1 started'), { timeoutMs: 2_000 });
    term.dispatch({ kind: 'wake' });
    await until(() => log.includes('answered 2'), { timeoutMs: 2_000 });
    assert.ok(!log.includes('read scheduledWindow'), 'not before batch 1 commits');
    commits.shift()?.();
    await until(() => log.includes('answered 1'), { timeoutMs: 2_000 });
    assert.deepEqual(log, [
      'commit 1 started',
      'read job',
      'answered 2',
      'commit 1 done',
      'read scheduledWindow',
      'answered 1',
    ]);
    await term.end();
  });
});
