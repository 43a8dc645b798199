/**
 * The worker inbox: an input waits for one more poll of its connection, a
 * connection whose end is queued is announced (`workerEnding`) before its
 * frames, and a tick goes after the frames read in its turn.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CoreInput } from '../../src/coordinator/core/types.js';
import { WorkerInbox } from '../../src/coordinator/term/worker-inbox.js';

const nextCheckPhase = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function inbox(): { inbox: WorkerInbox; seen: string[] } {
  const seen: string[] = [];
  const describe = (input: CoreInput): string =>
    input.kind === 'workerMessage'
      ? `${input.connId}:${input.msg.type}`
      : 'connId' in input
        ? `${input.connId}:${input.kind}`
        : input.kind;
  return { inbox: new WorkerInbox((input) => seen.push(describe(input))), seen };
}

const heartbeat = (connId: number): CoreInput & { kind: 'workerMessage' } => ({
  kind: 'workerMessage',
  connId,
  msg: { type: 'HEARTBEAT', workerId: `w${connId}` },
});

describe('WorkerInbox', () => {
  it('announces an end read one turn after the frames before it, at once, before those frames', async () => {
    const { inbox: box, seen } = inbox();
    box.push(heartbeat(1));
    box.push(heartbeat(2));
    await nextCheckPhase();
    assert.deepEqual(seen, [], 'held for one more poll');
    box.push({ kind: 'workerClosed', connId: 1, reason: 'connection closed' });
    assert.deepEqual(seen, ['1:workerEnding'], 'the end is announced as soon as it is read');
    await nextCheckPhase();
    assert.deepEqual(seen, ['1:workerEnding', '1:HEARTBEAT', '2:HEARTBEAT']);
    await nextCheckPhase();
    assert.deepEqual(seen.slice(3), ['1:workerClosed']);
    assert.equal(box.size, 0);
  });

  it('delivers a tick after the frames read in its turn', async () => {
    const { inbox: box, seen } = inbox();
    box.tick();
    box.push(heartbeat(1));
    await nextCheckPhase();
    await nextCheckPhase();
    assert.deepEqual(seen, ['1:HEARTBEAT', 'tick']);
  });

  it('delivers everything at once on flushAll, and nothing after clear', async () => {
    const { inbox: box, seen } = inbox();
    box.push(heartbeat(1));
    box.push({ kind: 'workerClosed', connId: 1, reason: 'bye' });
    box.flushAll();
    assert.deepEqual(seen, ['1:workerEnding', '1:HEARTBEAT', '1:workerClosed']);
    box.push(heartbeat(2));
    box.clear();
    await nextCheckPhase();
    await nextCheckPhase();
    assert.equal(seen.length, 3);
  });
});
