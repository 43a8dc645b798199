/**
 * `scripts/worker.sh` at the edges of its documented limits: every capacity
 * up to the maximum starts with its default prefetch (2 x capacity).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { MAX_CAPACITY } from '../../src/protocol/limits.js';
import { ScriptProcess } from '../helpers/processes.js';

describe('worker.sh --capacity', () => {
  const procs: ScriptProcess[] = [];
  after(async () => {
    await Promise.all(procs.map((proc) => proc.stop()));
  });

  for (const capacity of [600, MAX_CAPACITY]) {
    it(`starts with capacity ${capacity} and the default prefetch`, async () => {
      // Nothing listens on port 1: it starts, then keeps dialling.
      const proc = ScriptProcess.start('worker.sh', [
        ...['--capacity', String(capacity), '--coordinator-host', '127.0.0.1'],
        ...['--coordinator-port', '1', '--reconnect-delay-millis', '60000'],
      ]);
      procs.push(proc);
      await proc.waitForOutput(
        new RegExp(`worker started .*capacity=${capacity} prefetch=${2 * capacity}`),
      );
      assert.equal(await proc.stop(), 0, proc.output);
    });
  }
});
