/**
 * The client CLI's commands as a table, in the order `--help` lists them,
 * and the flags every command takes. Each command lives in a file of its own
 * under commands/ (commands/command.ts says what a command is).
 */
import { MAX_PORT } from '../protocol/limits.js';
import { DIALLER_SECURITY_FLAGS } from './security-flags.js';
import type { FlagSpec } from './flags.js';
import type { CommandSpec } from './commands/command.js';
import { BENCH_COMMAND } from './commands/bench.js';
import { CANCEL_COMMAND } from './commands/cancel.js';
import { EVENTS_COMMAND } from './commands/events.js';
import { LIST_COMMAND } from './commands/list.js';
import { PUBLISH_COMMAND } from './commands/publish.js';
import { PURGE_COMMAND } from './commands/purge.js';
import { QUEUE_COMMAND } from './commands/queue.js';
import { RERUN_COMMAND } from './commands/rerun.js';
import { SCHEDULE_COMMAND } from './commands/schedule.js';
import { SIGNAL_COMMAND } from './commands/signal.js';
import { STATUS_COMMAND } from './commands/status.js';
import { SUBMIT_COMMAND } from './commands/submit.js';
import { SUBMIT_FLOW_COMMAND } from './commands/submit-flow.js';
import { SUBMIT_MANY_COMMAND } from './commands/submit-many.js';
import { TRIGGER_COMMAND } from './commands/trigger.js';
import { WAIT_COMMAND } from './commands/wait.js';
import { WATCH_COMMAND } from './commands/watch.js';
import { WORKERS_COMMAND } from './commands/workers.js';
import { SHARDS_COMMAND } from './commands/shards.js';

export type { ArgSpec, CommandContext, CommandOutput, CommandSpec } from './commands/command.js';
export { SUBMIT_COMMAND, runShortcut } from './commands/submit.js';
export { TASKS, suggestShortcut } from './commands/shortcuts.js';

/**
 * Connection and output settings: the only client flags that may also come
 * from the environment (DTP_HOST, DTP_PORT, DTP_JSON).
 */
export const GLOBAL_FLAGS: readonly FlagSpec[] = [
  {
    name: 'host',
    type: 'string',
    default: 'localhost',
    placeholder: 'h1[:p1],h2[:p2],…',
    help: 'coordinator host, or several coordinators sharing PostgreSQL (the client follows the leader)',
  },
  {
    name: 'port',
    type: 'int',
    min: 1,
    max: MAX_PORT,
    default: 7071,
    help: 'coordinator client port',
  },
  { name: 'json', type: 'boolean', help: 'print exactly one JSON document on stdout' },
  ...DIALLER_SECURITY_FLAGS,
];

export const COMMANDS: readonly CommandSpec[] = [
  SUBMIT_COMMAND,
  STATUS_COMMAND,
  WAIT_COMMAND,
  WATCH_COMMAND,
  EVENTS_COMMAND,
  CANCEL_COMMAND,
  LIST_COMMAND,
  WORKERS_COMMAND,
  SUBMIT_FLOW_COMMAND,
  PURGE_COMMAND,
  SUBMIT_MANY_COMMAND,
  BENCH_COMMAND,
  QUEUE_COMMAND,
  SCHEDULE_COMMAND,
  RERUN_COMMAND,
  SIGNAL_COMMAND,
  PUBLISH_COMMAND,
  TRIGGER_COMMAND,
  SHARDS_COMMAND,
];
