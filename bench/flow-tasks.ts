/**
 * The task module the flows benchmark's workers load (`--tasks`): `stamp`
 * returns when its handler started and ended, on the worker's clock (the
 * workers run on the benchmark's own machine, so every process reads the
 * same clock).
 */
import { setTimeout as delay } from 'node:timers/promises';
import { defineTasks } from '../src/sdk/task.js';

export default defineTasks({
  /** Waits `ms`: one per slot at once starts every task thread before the measurement. */
  hold: async (payload: { ms?: number }) => {
    await delay(payload.ms ?? 0);
    return null;
  },
  stamp: () => {
    const startMs = Date.now();
    return { startMs, endMs: Date.now() };
  },
});
