/**
 * One job: its state and settings (a delayed job's run time, with a
 * countdown while it is SCHEDULED; the schedule that made it; its
 * deduplication key and expiry, "expired" once that cancelled it; what a
 * WAITING job waits for and the signals it holds), payload, result, error, the attempt
 * history on a timeline and as a table, and the actions it allows (cancel
 * and send a signal while it is not terminal; re-run once FAILED or
 * CANCELLED), each behind a confirmation; its parents, child jobs, steps and
 * flow (components/flow.tsx).
 * Refreshed whenever the live stream reports a change of it or of a job in
 * its flow view.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { isTerminalState } from '../../../src/protocol/messages.js';
import { ApiError, api, type FlowView, type JobDetails, type JobExtras } from '../api.js';
import { ExpiredBadge, OutcomeBadge, StateBadge } from '../components/badges.js';
import { ConfirmDialog } from '../components/confirm.js';
import { FlowTree, Relations } from '../components/flow.js';
import { SendSignalDialog, WaitingForText, signalNotice } from '../components/signals.js';
import { AttemptTimeline } from '../components/timeline.js';
import {
  formatAttempts,
  formatCountdown,
  formatDurationMs,
  formatTime,
  prettyJson,
} from '../format.js';
import { useLatestRequest, useLive, useNow, useThrottled } from '../hooks.js';
import { jobHref, navigate } from '../router.js';

type Action = 'cancel' | 'rerun' | 'signal';

function Field({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <>
      <dt>{label}</dt>
      <dd>{children}</dd>
    </>
  );
}

function Actions({
  details,
  onChanged,
}: {
  details: JobDetails;
  onChanged: (notice?: string) => void;
}) {
  const [open, setOpen] = useState<Action | null>(null);
  const { job } = details;
  const canCancel = !isTerminalState(job.state);
  const canRerun = job.state === 'FAILED' || job.state === 'CANCELLED';
  return (
    <div class="actions">
      {canCancel && (
        <button
          type="button"
          class="danger-outline"
          onClick={() => setOpen('cancel')}
          data-testid="action-cancel"
        >
          Cancel job
        </button>
      )}
      {canCancel && (
        <button type="button" onClick={() => setOpen('signal')} data-testid="action-signal">
          Send signal…
        </button>
      )}
      {canRerun && (
        <button
          type="button"
          class="primary"
          onClick={() => setOpen('rerun')}
          data-testid="action-rerun"
        >
          Re-run as a new job
        </button>
      )}
      {open === 'cancel' && (
        <ConfirmDialog
          title="Cancel this job?"
          confirmLabel="Cancel job"
          danger
          onClose={() => setOpen(null)}
          onConfirm={async () => {
            await api.cancel(job.jobId);
            onChanged();
          }}
        >
          <p>
            The job is {job.state}. It will become CANCELLED
            {job.state === 'RUNNING' ? ' and its worker is told to stop the task' : ''}. This cannot
            be undone.
          </p>
        </ConfirmDialog>
      )}
      {open === 'signal' && (
        <SendSignalDialog
          jobId={job.jobId}
          suggested={job.waitingFor?.signal ?? null}
          onClose={() => setOpen(null)}
          onSent={(result) => onChanged(signalNotice(result))}
        />
      )}
      {open === 'rerun' && (
        <ConfirmDialog
          title="Re-run this job?"
          confirmLabel="Submit a new job"
          onClose={() => setOpen(null)}
          onConfirm={async () => {
            const { jobId } = await api.rerun(job.jobId);
            navigate(jobHref(jobId));
          }}
        >
          <p>
            A new {job.taskType} job is submitted with the same payload, priority, attempts and
            timeout.
            {job.idempotencyKey != null &&
              ' The idempotency key is not copied (it names this job).'}
          </p>
        </ConfirmDialog>
      )}
    </div>
  );
}

function AttemptTable({ details }: { details: JobDetails }) {
  const attempts = details.attempts ?? [];
  if (attempts.length === 0) return null;
  return (
    <table class="attempts" data-testid="attempts-table">
      <thead>
        <tr>
          <th>#</th>
          <th>Worker</th>
          <th>Started</th>
          <th>Duration</th>
          <th>Outcome</th>
          <th>Error</th>
        </tr>
      </thead>
      <tbody>
        {attempts.map((a) => (
          <tr key={a.attemptId}>
            <td>{a.attemptNumber}</td>
            <td class="mono">{a.workerId}</td>
            <td>{formatTime(a.startedAtMillis)}</td>
            <td>
              {a.finishedAtMillis === null
                ? 'running'
                : formatDurationMs(a.finishedAtMillis - a.startedAtMillis)}
            </td>
            <td>
              <OutcomeBadge outcome={a.outcome} />
            </td>
            <td class="error-text">{a.error ?? ''}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function Body({
  details,
  flow,
  onChanged,
}: {
  details: JobDetails;
  flow: FlowView | null;
  onChanged: () => void;
}) {
  const now = useNow();
  const [notice, setNotice] = useState<string | null>(null);
  const job: JobDetails['job'] & JobExtras = details.job;
  const result =
    job.result === null ? null : job.resultFormat === 'json' ? prettyJson(job.result) : job.result;
  return (
    <>
      <div class="page-head">
        <h1 class="mono" data-testid="job-id">
          {job.jobId}
        </h1>
        <StateBadge state={job.state} />
        <ExpiredBadge job={job} />
        <Actions
          details={details}
          onChanged={(message) => {
            setNotice(message ?? null);
            onChanged();
          }}
        />
      </div>
      {notice !== null && (
        <p class="notice" data-testid="notice">
          {notice}
        </p>
      )}
      <dl class="fields">
        <Field label="Task type">{job.taskType}</Field>
        <Field label="Priority">{job.priority}</Field>
        <Field label="Attempts">
          <span data-testid="job-attempts">{formatAttempts(job)}</span>
        </Field>
        {(job.suspensions ?? 0) > 0 && (
          <Field label="Suspensions">
            <span data-testid="job-suspensions">{job.suspensions}</span>
            <span class="muted"> (sleeps and waits: not counted as attempts)</span>
          </Field>
        )}
        {job.state === 'WAITING' && job.waitingFor != null && (
          <Field label="Waiting for">
            <WaitingForText waitingFor={job.waitingFor} nowMs={now} />
          </Field>
        )}
        {(job.signalsHeld ?? 0) > 0 && (
          <Field label="Signals held">
            <span data-testid="job-signals-held">{job.signalsHeld}</span>
            <span class="muted"> (sent, not yet taken by ctx.waitForSignal)</span>
          </Field>
        )}
        {(job.requeues ?? 0) > 0 && (
          <Field label="Requeues">
            <span data-testid="job-requeues">{job.requeues}</span>
            <span class="muted"> (cut off through no fault of their own: not counted)</span>
          </Field>
        )}
        {(job.rateLimited ?? 0) > 0 && (
          <Field label="Rate limited">
            <span data-testid="job-rate-limited">{job.rateLimited}</span>
            <span class="muted"> (the handler was rate limited: not counted)</span>
          </Field>
        )}
        <Field label="Progress">
          <span data-testid="job-progress">
            {job.progress == null
              ? '-'
              : `${Math.round(job.progress.fraction * 100)}%${job.progress.message === null ? '' : ` ${job.progress.message}`}`}
          </span>
        </Field>
        <Field label="Worker">{job.workerId ?? '-'}</Field>
        <Field label="Idempotency key">{job.idempotencyKey ?? '-'}</Field>
        {job.dedupKey != null && (
          <Field label="Deduplication key">
            <span class="mono" data-testid="job-dedup-key">
              {job.dedupKey}
            </span>
            <span class="muted" data-testid="job-dedup-mode">
              {' '}
              ({job.dedupMode ?? 'active'})
            </span>
          </Field>
        )}
        {job.expiresAtMillis != null && (
          <Field label="Expires at">
            <span data-testid="job-expires-at">{formatTime(job.expiresAtMillis)}</span>
            {/* Only a job waiting to start can still expire (a running attempt goes on). */}
            {!isTerminalState(job.state) && job.state !== 'RUNNING' && (
              <span class="muted" data-testid="job-expires-countdown">
                {' '}
                ({formatCountdown(job.expiresAtMillis - now)} unless an attempt starts first)
              </span>
            )}
          </Field>
        )}
        <Field label="Timeout">
          {job.timeoutMillis == null ? '-' : formatDurationMs(job.timeoutMillis)}
        </Field>
        <Field label="Submitted">{formatTime(job.createdAtMillis)}</Field>
        {job.runAtMillis != null && (
          <Field label="Runs at">
            <span data-testid="job-run-at">{formatTime(job.runAtMillis)}</span>
            {job.state === 'SCHEDULED' && (
              <span class="muted" data-testid="job-countdown">
                {' '}
                {formatCountdown(job.runAtMillis - now)}
              </span>
            )}
          </Field>
        )}
        {job.scheduleName != null && (
          <Field label="Schedule">
            <a href="#/schedules" data-testid="job-schedule">
              {job.scheduleName}
            </a>
          </Field>
        )}
        <Field label="Started">{formatTime(job.startedAtMillis)}</Field>
        <Field label="Finished">{formatTime(job.finishedAtMillis)}</Field>
      </dl>
      <Relations job={job} flow={flow} />
      <FlowTree flow={flow} jobId={job.jobId} />
      <section>
        <h2>Attempts</h2>
        <AttemptTimeline job={job} attempts={details.attempts ?? []} nowMs={now} />
        <AttemptTable details={details} />
      </section>
      <section class="blocks">
        <div>
          <h2>Payload</h2>
          {details.payloadOmitted === true ? (
            <p class="muted">Too large to show here.</p>
          ) : (
            <pre data-testid="job-payload">{JSON.stringify(details.payload ?? {}, null, 2)}</pre>
          )}
        </div>
        <div>
          <h2>Result</h2>
          {result === null ? <p class="muted">-</p> : <pre data-testid="job-result">{result}</pre>}
          {job.error !== null && (
            <>
              <h2>Error</h2>
              <pre class="error-text" data-testid="job-error">
                {job.error}
              </pre>
            </>
          )}
        </div>
      </section>
    </>
  );
}

export function JobPage({ jobId }: { jobId: string }) {
  const [details, setDetails] = useState<JobDetails | null>(null);
  const [flow, setFlow] = useState<FlowView | null>(null);
  const [error, setError] = useState<string | null>(null);
  const begin = useLatestRequest();
  const load = (): void => {
    const current = begin();
    // The flow view is extra: a failure there leaves the rest of the page as it is.
    Promise.all([api.job(jobId), api.flow(jobId).catch(() => null)]).then(
      ([d, f]) => {
        if (!current()) return;
        setDetails(d);
        setFlow(f);
        setError(null);
      },
      (err: unknown) =>
        current() &&
        setError(
          err instanceof ApiError && err.status === 404
            ? `No job ${jobId} (it may have been purged).`
            : String(err),
        ),
    );
  };
  useEffect(load, [jobId]);
  // A change of this job or of any job in its flow view reloads both (a
  // burst of changes in a busy flow: one reload per 300 ms).
  const shown = new Set((flow?.nodes ?? []).map((n) => n.jobId));
  const reload = useThrottled(load, 300);
  useLive('jobs', (message) => {
    if (message.truncated || message.changes.some((c) => c.jobId === jobId)) load();
    else if (message.changes.some((c) => shown.has(c.jobId))) reload();
  });
  return (
    <div class="job-page" data-testid="job-page">
      <p>
        <a href="#/jobs">← Jobs</a>
      </p>
      {error !== null && <p class="error">{error}</p>}
      {details !== null && <Body details={details} flow={flow} onChanged={load} />}
    </div>
  );
}
