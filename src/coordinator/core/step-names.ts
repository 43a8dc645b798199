/**
 * The names of the steps the coordinator records itself: a suspension
 * (`ctx.sleep`, `ctx.waitFor`) is a step of the attempt it ends. Kept apart
 * (no imports) so that the snapshot (job.ts) and the step records
 * (step-records.ts) read the same names.
 */

/** The step a sleep records (its value: `{untilMillis}`). */
export const SLEEP_STEP = 'dtp.sleep';

/** The step a wait records (its value: `{jobId}`, then the job's outcome). */
export const WAIT_STEP = 'dtp.waitFor';

/**
 * The step a wait for a signal records (its value: `{waitingFor}` while it
 * waits, then `{signal}`: the signal taken, or null when it timed out).
 */
export const SIGNAL_WAIT_STEP = 'dtp.waitForSignal';

/** The step a wait for an event records (`{waitingFor}`, then `{event}` or `{event: null}`). */
export const EVENT_WAIT_STEP = 'dtp.waitForEvent';

/** True for the step of a suspension: the attempt that recorded it ended there, without failing. */
export function isSuspensionStep(name: string): boolean {
  return (
    name === SLEEP_STEP ||
    name === WAIT_STEP ||
    name === SIGNAL_WAIT_STEP ||
    name === EVENT_WAIT_STEP
  );
}
