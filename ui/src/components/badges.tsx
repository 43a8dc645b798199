/** Coloured labels for job states and attempt outcomes. */
import type { AttemptOutcome, JobState } from '../../../src/protocol/messages.js';

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
