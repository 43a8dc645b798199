/**
 * The task module the flows benchmark's workers load (`--tasks`): `stamp`
 * returns when its handler started and ended, on the worker's clock (the
 * workers run on the benchmark's own machine, so every process reads the
 * same clock).
 */
import { defineTasks } from '../src/sdk/task.js';

export default defineTasks({
  stamp: () => {
    const startMs = Date.now();
    return { startMs, endMs: Date.now() };
  },
});
