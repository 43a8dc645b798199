/**
 * A job's relations on its page: its parents (with their states), the job
 * that made it and the jobs it made (when the snapshot names them), its
 * durable steps, and its flow as an indented tree: ancestors above (one
 * indent per level), the job, its dependents not yet ended below. The tree
 * comes from `GET /api/jobs/:id/flow` (at most 200 jobs).
 */
import type { JobSnapshot } from '../../../src/protocol/messages.js';
import type { FlowNode, FlowView, JobExtras } from '../api.js';
import { formatBytes, formatTime, shortId } from '../format.js';
import { jobHref } from '../router.js';
import { StateBadge } from './badges.js';

/** Most parents or child jobs listed (a job may have 1,000 parents). */
const MAX_LISTED = 200;

function More({ total }: { total: number }) {
  if (total <= MAX_LISTED) return null;
  return <li class="muted">and {total - MAX_LISTED} more</li>;
}

function JobLink({ jobId, testId }: { jobId: string; testId: string }) {
  return (
    <a class="mono" href={jobHref(jobId)} data-testid={testId} data-job-id={jobId} title={jobId}>
      {shortId(jobId)}
    </a>
  );
}

/** Parents, the job that made it, the jobs it made, and steps; nothing when it has none. */
export function Relations({ job, flow }: { job: JobSnapshot & JobExtras; flow: FlowView | null }) {
  const parents = job.dependsOn ?? [];
  const children = job.children ?? [];
  const steps = job.steps ?? [];
  const stateOf = new Map((flow?.nodes ?? []).map((n) => [n.jobId, n.state]));
  if (
    parents.length === 0 &&
    children.length === 0 &&
    steps.length === 0 &&
    job.parentJobId == null
  )
    return null;
  return (
    <section data-testid="job-relations">
      {parents.length > 0 && (
        <>
          <h2>Parents</h2>
          <ul class="relations" data-testid="job-parents">
            {parents.slice(0, MAX_LISTED).map((id) => {
              const state = stateOf.get(id);
              return (
                <li key={id}>
                  <JobLink jobId={id} testId="parent-link" />{' '}
                  {state === undefined ? (
                    <span class="muted">-</span>
                  ) : (
                    <StateBadge state={state} />
                  )}
                </li>
              );
            })}
            <More total={parents.length} />
          </ul>
        </>
      )}
      {job.parentJobId != null && (
        <>
          <h2>Made by</h2>
          <p>
            <JobLink jobId={job.parentJobId} testId="parent-job-link" />
          </p>
        </>
      )}
      {children.length > 0 && (
        <>
          <h2>Child jobs</h2>
          <ul class="relations" data-testid="job-children">
            {children.slice(0, MAX_LISTED).map((id) => (
              <li key={id}>
                <JobLink jobId={id} testId="child-link" />
              </li>
            ))}
            <More total={children.length} />
          </ul>
        </>
      )}
      {steps.length > 0 && (
        <>
          <h2>Steps</h2>
          <table class="attempts" data-testid="job-steps">
            <thead>
              <tr>
                <th>Step</th>
                <th>Result</th>
                <th>Done at</th>
              </tr>
            </thead>
            <tbody>
              {steps.map((step) => (
                <tr key={step.name} data-testid="step-row">
                  <td class="mono">{step.name}</td>
                  <td>{formatBytes(step.resultBytes)}</td>
                  <td>{formatTime(step.atMillis)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </section>
  );
}

function TreeRow({ node, indent, current }: { node: FlowNode; indent: number; current: boolean }) {
  return (
    <li
      class={current ? 'flow-node current' : 'flow-node'}
      style={{ paddingLeft: `${indent * 1.5}rem` }}
      data-testid="flow-node"
      data-job-id={node.jobId}
      data-level={node.level}
    >
      {current ? (
        <span class="mono" title={node.jobId}>
          {shortId(node.jobId)}
        </span>
      ) : (
        <JobLink jobId={node.jobId} testId="flow-link" />
      )}{' '}
      <StateBadge state={node.state} /> <span class="muted">{node.taskType}</span>
    </li>
  );
}

/** The flow around the job; nothing when it has no parents and no dependents. */
export function FlowTree({ flow, jobId }: { flow: FlowView | null; jobId: string }) {
  if (flow === null || flow.nodes.length <= 1) return null;
  const top = Math.min(...flow.nodes.map((n) => n.level));
  return (
    <section>
      <h2>Flow</h2>
      <p class="muted">
        Parents above, dependents below (those that have not ended). One indent per level.
      </p>
      <ul class="flow-tree" data-testid="flow-tree">
        {flow.nodes.map((node) => (
          <TreeRow
            key={node.jobId}
            node={node}
            indent={node.level - top}
            current={node.jobId === jobId}
          />
        ))}
      </ul>
      {flow.truncated && (
        <p class="muted" data-testid="flow-truncated">
          Only the first {flow.nodes.length} jobs are shown.
        </p>
      )}
    </section>
  );
}
