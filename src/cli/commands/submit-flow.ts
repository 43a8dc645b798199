/**
 * `submit-flow <file|->`: the flow document checked here first (shape,
 * duplicate refs, cycles: exit 2, nothing sent), then sent as one request.
 */
import { flowMessage } from '../../client/client.js';
import type { FlowJobSpec } from '../../client/client.js';
import { requestFrame } from '../../client/connection.js';
import { MAX_FLOW_JOBS } from '../../protocol/limits.js';
import { UsageError } from '../flags.js';
import type { CommandContext, CommandOutput, CommandSpec } from './command.js';

async function runSubmitFlow(ctx: CommandContext): Promise<CommandOutput> {
  const file = ctx.args[0] ?? '';
  const source = file === '-' ? '(standard input)' : file;
  let text: string;
  try {
    text = await ctx.readInput(file);
  } catch (err) {
    throw new UsageError(`cannot read ${source}: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${source} is not JSON: ${(err as Error).message}`);
  }
  const flow = checkFlowDocument(doc, source);
  let msg: ReturnType<typeof flowMessage>;
  try {
    msg = flowMessage(flow);
  } catch (err) {
    throw new UsageError(`${source}: ${(err as Error).message}`);
  }
  requestFrame(msg); // too large for a frame: said before connecting
  const { jobs } = await (await ctx.client()).submitFlow(flow);
  const human = Object.entries(jobs)
    .map(([ref, jobId]) => `${ref}\t${jobId}\n`)
    .join('');
  return { json: { jobs }, human };
}

/** The flow document's shape, refs and acyclicity; a UsageError (exit 2) for what is wrong. */
function checkFlowDocument(doc: unknown, source: string): { jobs: FlowJobSpec[] } {
  const bad = (detail: string): UsageError => new UsageError(`${source}: ${detail}`);
  if (!isPlainRecord(doc) || !Array.isArray(doc.jobs)) throw bad('expected {"jobs": [...]}');
  const jobs: unknown[] = doc.jobs;
  if (jobs.length === 0) throw bad('the flow has no jobs');
  if (jobs.length > MAX_FLOW_JOBS) throw bad(`at most ${MAX_FLOW_JOBS} jobs, got ${jobs.length}`);
  const refs = new Set<string>();
  for (const [index, job] of jobs.entries()) {
    if (!isPlainRecord(job)) throw bad(`jobs[${index}] is not an object`);
    if (typeof job.ref !== 'string' || job.ref === '')
      throw bad(`jobs[${index}].ref must be a non-empty string`);
    if (refs.has(job.ref)) throw bad(`ref ${JSON.stringify(job.ref)} is used twice`);
    refs.add(job.ref);
    if (typeof job.taskType !== 'string') throw bad(`jobs[${index}].taskType must be a string`);
    if (!isPlainRecord(job.payload)) throw bad(`jobs[${index}].payload must be a JSON object`);
    const dependsOn: unknown = job.dependsOn;
    if (
      dependsOn !== undefined &&
      dependsOn !== null &&
      (!Array.isArray(dependsOn) || dependsOn.some((d) => typeof d !== 'string'))
    ) {
      throw bad(`jobs[${index}].dependsOn must be an array of refs or job ids`);
    }
    const key: unknown = job.idempotencyKey;
    if (key !== undefined && key !== null && (typeof key !== 'string' || key === '')) {
      throw bad(`jobs[${index}].idempotencyKey must be a non-empty string`);
    }
  }
  const typed = jobs as FlowJobSpec[];
  const cycle = findCycle(typed);
  if (cycle !== null) throw bad(`the dependencies form a cycle: ${cycle.join(' -> ')}`);
  return { jobs: typed };
}

/** A cycle among the refs (as a path that ends where it starts), or null. */
function findCycle(jobs: readonly FlowJobSpec[]): string[] | null {
  const parentsOf = new Map(jobs.map((job) => [job.ref, job.dependsOn ?? []]));
  const state = new Map<string, 'open' | 'done'>();
  for (const start of parentsOf.keys()) {
    if (state.has(start)) continue;
    // Depth-first with an explicit stack: a 10,000-job chain must not overflow.
    const path: string[] = [];
    const stack: { ref: string; next: number }[] = [{ ref: start, next: 0 }];
    state.set(start, 'open');
    path.push(start);
    while (stack.length > 0) {
      const top = stack[stack.length - 1] as { ref: string; next: number };
      const parents = parentsOf.get(top.ref) ?? [];
      if (top.next >= parents.length) {
        state.set(top.ref, 'done');
        stack.pop();
        path.pop();
        continue;
      }
      const parent = parents[top.next++] as string;
      if (!parentsOf.has(parent)) continue; // an existing job's id
      if (state.get(parent) === 'open') return [...path.slice(path.indexOf(parent)), parent];
      if (state.get(parent) === 'done') continue;
      state.set(parent, 'open');
      path.push(parent);
      stack.push({ ref: parent, next: 0 });
    }
  }
  return null;
}

function isPlainRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export const SUBMIT_FLOW_COMMAND: CommandSpec = {
  name: 'submit-flow',
  summary: 'submit many jobs that depend on each other by ref, all at once or none',
  args: [{ name: 'file', help: 'the flow document, {"jobs": [...]}, or - for standard input' }],
  flags: [],
  run: runSubmitFlow,
};
