/** `shards`: the shards of the database, who leads each, and the coordinators alive on it. */
import { formatTable, type Cell } from '../output.js';
import type { CommandContext, CommandOutput, CommandSpec } from './command.js';

async function runShards(ctx: CommandContext): Promise<CommandOutput> {
  const map = await (await ctx.client()).shards();
  const shardRows = map.shards.map((s): Cell[] => [
    { text: String(s.shard) },
    { text: s.leader ?? '(none)' },
    { text: String(s.epoch) },
  ]);
  const coordinatorRows = map.coordinators.map((c): Cell[] => [
    { text: c.address },
    { text: String(c.shards) },
  ]);
  return {
    json: map,
    human:
      formatTable(['SHARD', 'LEADER', 'EPOCH'], shardRows) +
      '\n' +
      formatTable(['COORDINATOR', 'SHARDS'], coordinatorRows),
  };
}

export const SHARDS_COMMAND: CommandSpec = {
  name: 'shards',
  summary: 'list the shards, who leads each, and the coordinators',
  args: [],
  flags: [],
  run: runShards,
};
