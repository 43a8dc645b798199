/**
 * The worker's watchdog on its coordinator: silence for the timeout is
 * reported once; anything heard restarts the count; a stall of the worker's
 * own loop is not counted as the coordinator's silence.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CoordinatorWatchdog } from '../../src/worker/coordinator-watchdog.js';
import { until } from '../helpers/until.js';

function busyWait(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // the worker's own loop, stalled
  }
}

describe('CoordinatorWatchdog', () => {
  it('reports silence once after the timeout', async () => {
    const reports: number[] = [];
    const dog = new CoordinatorWatchdog(60, (ms) => reports.push(ms));
    dog.start();
    await until(() => reports.length === 1);
    assert.ok((reports[0] ?? 0) >= 60);
    assert.equal(dog.watching, false);
  });

  it('keeps quiet while something is heard within every period', async () => {
    const reports: number[] = [];
    const dog = new CoordinatorWatchdog(80, (ms) => reports.push(ms));
    dog.start();
    let beats = 0;
    const heard = setInterval(() => {
      dog.heard();
      beats++;
    }, 20);
    // Five periods' worth of hearing (however late the timer runs on a busy machine).
    await until(() => beats >= 20, { what: '20 beats heard' });
    clearInterval(heard);
    assert.deepEqual(reports, []);
    dog.stop();
  });

  it('does not blame the coordinator for a stall of its own loop', async () => {
    const reports: number[] = [];
    const dog = new CoordinatorWatchdog(100, (ms) => reports.push(ms));
    dog.start();
    busyWait(400); // frozen well past the timeout
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(reports, [], 'silence during our own stall is not judged');
    // Real silence afterwards is still reported.
    await until(() => reports.length === 1);
  });
});
