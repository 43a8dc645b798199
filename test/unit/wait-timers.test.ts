/**
 * The timeouts of pending waits: one Node timer over a heap. Each fires once,
 * in due order; a cleared one never fires; a closed connection's are gone at
 * once.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { WaitTimers } from '../../src/coordinator/term/wait-timers.js';
import { until } from '../helpers/until.js';

describe('WaitTimers', () => {
  it('fires each timeout once, earliest first', async () => {
    const fired: string[] = [];
    const timers = new WaitTimers((conn, req) => fired.push(`${conn}/${req}`));
    timers.arm(1, 1, 60);
    timers.arm(1, 2, 20);
    timers.arm(2, 1, 40);
    timers.arm(2, 2, 1);
    await until(() => fired.length === 4, { what: 'four timeouts' });
    assert.deepEqual(fired, ['2/2', '1/2', '2/1', '1/1']);
    assert.equal(timers.size, 0);
  });

  it('never fires a cleared timeout, nor those of a dropped connection', async () => {
    const fired: string[] = [];
    const timers = new WaitTimers((conn, req) => fired.push(`${conn}/${req}`));
    for (let req = 0; req < 100; req++) timers.arm(1, req, 5 + req);
    timers.arm(2, 1, 5);
    timers.arm(3, 1, 30);
    timers.clear(2, 1);
    timers.dropConnection(1);
    assert.equal(timers.size, 1, 'only the timeout of connection 3 is left');
    await until(() => fired.length === 1, { what: 'the last timeout' });
    assert.deepEqual(fired, ['3/1']);
  });

  it('re-arming a request replaces its timeout', async () => {
    const fired: number[] = [];
    const timers = new WaitTimers((_conn, req) => fired.push(req));
    timers.arm(1, 7, 10_000);
    timers.arm(1, 7, 1);
    assert.equal(timers.size, 1);
    await until(() => fired.length === 1, { what: 'the timeout' });
    timers.clearAll();
    assert.equal(timers.size, 0);
  });
});
