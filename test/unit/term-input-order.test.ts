/**
 * The order in which a term hands its connections' inputs to the core: a
 * client's request waits the same poll as a worker's frames, so whatever was
 * read first reaches the core first, whichever port it came in on.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CoordinatorCore } from '../../src/coordinator/core/core.js';
import type { CoreInput, Effect } from '../../src/coordinator/core/types.js';
import { Term, type TermOutlets } from '../../src/coordinator/term/term.js';
import type { StoreHandle } from '../../src/store/open-store.js';
import { silentLogger } from '../helpers/logger.js';

const nextCheckPhase = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** A term around a core that only records what it is handed. */
function recordingTerm(): { term: Term; seen: string[] } {
  const seen: string[] = [];
  const core = {
    handle(input: CoreInput): Effect[] {
      if (input.kind === 'tick' || input.kind === 'committed') return [];
      seen.push('connId' in input ? `${input.connId}:${input.kind}` : input.kind);
      return [];
    },
    takeBatch: () => null,
  } as unknown as CoordinatorCore;
  const handle = {
    store: { description: 'none' },
    close: () => Promise.resolve(),
  } as unknown as StoreHandle;
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
  return { term, seen };
}

describe('Term input order', () => {
  it('hands a client request to the core after the worker frames read before it', async () => {
    const { term, seen } = recordingTerm();
    term.workerInput({
      kind: 'workerMessage',
      connId: 1,
      msg: { type: 'HEARTBEAT', workerId: 'w1' },
    });
    term.clientInput({
      kind: 'clientRequest',
      connId: 2,
      requestId: 0,
      msg: { type: 'GET_JOB_STATUS', jobId: 'j1' },
    });
    term.clientClosed(2);
    assert.deepEqual(seen, [], 'nothing is handed over in the turn it was read');
    await nextCheckPhase();
    await nextCheckPhase();
    assert.deepEqual(seen, ['1:workerMessage', '2:clientRequest', '2:clientClosed']);
    await term.end();
  });
});
