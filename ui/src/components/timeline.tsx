/**
 * A job's attempts on one time axis, from its submission to its end (or
 * now): one bar per attempt, coloured by outcome, labelled with the worker.
 */
import type { AttemptSnapshot, JobSnapshot } from '../../../src/protocol/messages.js';
import { formatDurationMs, formatTime } from '../format.js';

export function AttemptTimeline({
  job,
  attempts,
  nowMs,
}: {
  job: JobSnapshot;
  attempts: AttemptSnapshot[];
  nowMs: number;
}) {
  if (attempts.length === 0) return <p class="muted">No attempt has started yet.</p>;
  const start = job.createdAtMillis;
  const end = Math.max(
    job.finishedAtMillis ?? nowMs,
    ...attempts.map((a) => a.finishedAtMillis ?? nowMs),
    start + 1,
  );
  const span = end - start;
  const pos = (ms: number): number => ((ms - start) / span) * 100;
  return (
    <div class="timeline" data-testid="attempt-timeline">
      <div class="timeline-axis">
        <span>submitted {formatTime(start)}</span>
        <span>
          {job.finishedAtMillis != null ? `ended ${formatTime(job.finishedAtMillis)}` : 'now'}
        </span>
      </div>
      {attempts.map((a) => {
        const left = pos(a.startedAtMillis);
        const right = pos(a.finishedAtMillis ?? nowMs);
        const duration = (a.finishedAtMillis ?? nowMs) - a.startedAtMillis;
        return (
          <div
            class="timeline-row"
            key={a.attemptId}
            data-testid="attempt-row"
            data-outcome={a.outcome}
          >
            <span class="timeline-label">
              #{a.attemptNumber} {a.workerId}
            </span>
            <span class="timeline-track">
              <span
                class={`timeline-bar outcome-${a.outcome.toLowerCase()}`}
                style={{ left: `${left}%`, width: `${Math.max(0.6, right - left)}%` }}
                title={`${a.outcome} after ${formatDurationMs(duration)}${a.error !== null ? `: ${a.error}` : ''}`}
              />
            </span>
            <span class="timeline-outcome">
              {a.outcome} · {formatDurationMs(duration)}
            </span>
          </div>
        );
      })}
    </div>
  );
}
