/** `bench`: the load generator (../bench.ts). */
import { BENCH_FLAGS, runBenchCommand } from '../bench.js';
import type { CommandSpec } from './command.js';

export const BENCH_COMMAND: CommandSpec = {
  name: 'bench',
  summary: 'load generator: submits jobs and measures latency (never retries rejections)',
  args: [],
  flags: BENCH_FLAGS,
  run: (ctx) => runBenchCommand(ctx.values, ctx.progress, ctx.security()),
};
