/**
 * What every suspension of a running attempt shares (`ctx.sleep`,
 * `ctx.waitFor`, `ctx.waitForSignal`, `ctx.waitForEvent`): the step the
 * coordinator records for it, and the attempt's end without failing.
 */
import type { CoreJob, JobStep, RunningJob } from './job.js';
import { suspendAttempt } from './job-lifecycle.js';
import { transition } from './job-state.js';
import type { CoreState } from './state.js';
import { SLEEP_STEP, WAIT_STEP } from './step-names.js';

/** Appends a step to the job (its row changes too: its snapshot lists the steps). */
export function appendStep(s: CoreState, job: CoreJob, step: JobStep): void {
  job.steps.push(step);
  s.jobs.saveStep(job.jobId, job.steps.length - 1, step);
  // The job's row changes too: its snapshot lists the steps.
  s.jobs.save(job);
}

/**
 * Ends the running attempt of `job` without failing it: `job.suspended`, the
 * suspension's own step (`dtp.sleep` until `untilMs`, `dtp.waitFor` of
 * `waitingFor`, or the `step` given), the attempt recorded as SUSPENDED, and
 * the job moved `to`.
 */
export function suspend(
  s: CoreState,
  job: RunningJob,
  to: 'SCHEDULED' | 'WAITING',
  untilMs: number | null,
  waitingFor: string | null,
  step?: { name: string; value: unknown },
): void {
  const { workerId, attemptId } = job.lease;
  s.emit({
    type: 'job.suspended',
    jobId: job.jobId,
    workerId,
    attempt: job.attempts,
    attemptId,
    untilMs,
    waitingFor,
  });
  appendStep(s, job, {
    name: step?.name ?? (to === 'SCHEDULED' ? SLEEP_STEP : WAIT_STEP),
    result: JSON.stringify(
      step !== undefined
        ? step.value
        : to === 'SCHEDULED'
          ? { untilMillis: untilMs }
          : { jobId: waitingFor },
    ),
    atMs: s.nowMs,
  });
  suspendAttempt(s, job);
  transition(job, { to }, s.nowMs);
}
