/**
 * `submit-flow <file|->`: the flow document checked here first (shape,
 * duplicate refs, each job's options: exit 2, nothing sent), then sent as
 * one request. The coordinator judges the rest (a cycle, an unknown ref,
 * an invalid payload: exit 1 with its error, nothing created).
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
  const { jobs, deduplicated, replaced } = await (await ctx.client()).submitFlow(flow);
  for (const ref of deduplicated) {
    const how = replaced.includes(ref) ? ', its payload and run time replaced' : '';
    ctx.note(`Deduplicated: ref ${ref} is existing job ${jobs[ref] ?? '?'}${how}\n`);
  }
  const human = Object.entries(jobs)
    .map(([ref, jobId]) => `${ref}\t${jobId}\n`)
    .join('');
  return { json: { jobs }, human };
}

/** The flow document's shape and refs; a UsageError (exit 2) for what is wrong. */
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
  // A cycle is the coordinator's to find (FLOW_CYCLE, exit 1): it checks the
  // whole flow anyway, and one check cannot disagree with itself.
  return { jobs: jobs as FlowJobSpec[] };
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
