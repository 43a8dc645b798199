/** Coloured labels for job states and attempt outcomes, and a job's "expired". */
import type { AttemptOutcome, JobSnapshot, JobState } from '../../../src/protocol/messages.js';

export function StateBadge({ state }: { state: JobState }) {
  return (
    <span class={`badge state-${state.toLowerCase()}`} data-state={state}>
      {state}
    </span>
  );
}

export function OutcomeBadge({ outcome }: { outcome: AttemptOutcome }) {
  return <span class={`badge outcome-${outcome.toLowerCase()}`}>{outcome}</span>;
}

/** "expired" beside the state of a job cancelled because its expiry passed before it started. */
export function ExpiredBadge({ job }: { job: Pick<JobSnapshot, 'expired'> }) {
  if (job.expired !== true) return null;
  return (
    <span
      class="badge expired"
      data-testid="job-expired"
      title="Cancelled: its expiry time passed before an attempt started"
    >
      expired
    </span>
  );
}
