/**
 * The named queues: jobs by state, attempts running, limits (concurrency,
 * rate, per-group concurrency and rate), whether paused or held back by a
 * handler (RateLimitedError, the queue or some of its groups), and the
 * groups with the largest backlogs; pause and resume behind a confirmation.
 * Reloaded while shown (every two seconds, on the live overview push) and
 * at once after an action.
 */
import { useState } from 'preact/hooks';
import { JOB_STATES, type RateLimit } from '../../../src/protocol/messages.js';
import { api, type QueueInfo } from '../api.js';
import { ConfirmDialog } from '../components/confirm.js';
import { formatDurationMs, formatTime } from '../format.js';
import { useReloaded } from '../hooks.js';

const RELOAD_MS = 2_000;

function rateText(rate: RateLimit | null): string {
  return rate === null ? '-' : `${rate.max} per ${formatDurationMs(rate.intervalMillis)}`;
}

function limitText(limit: number | null): string {
  return limit === null ? '-' : String(limit);
}

function Counts({ queue }: { queue: QueueInfo }) {
  const shown = JOB_STATES.filter((s) => (queue.counts[s] ?? 0) > 0);
  if (shown.length === 0) return <span class="muted">no jobs</span>;
  return (
    <>
      {shown.map((state) => (
        <span
          key={state}
          class={`badge state-${state.toLowerCase()} count`}
          data-testid="queue-count"
          data-state={state}
          data-count={queue.counts[state]}
        >
          {state} {queue.counts[state]}
        </span>
      ))}
    </>
  );
}

function Groups({ queue }: { queue: QueueInfo }) {
  const groups = queue.groups ?? [];
  if (groups.length === 0) return null;
  return (
    <tr class="queue-groups" data-testid="queue-groups" data-queue={queue.name}>
      <td colSpan={7}>
        <span class="muted">Largest backlogs: </span>
        {groups.map((g) => (
          <span
            key={g.groupKey ?? ''}
            class="chip"
            data-testid="group-row"
            data-group={g.groupKey ?? ''}
            data-queued={g.queued}
          >
            <span class="mono">{g.groupKey ?? '(no group)'}</span> {g.queued} queued
            {g.running > 0 ? `, ${g.running} running` : ''}
          </span>
        ))}
      </td>
    </tr>
  );
}

/** Whether a handler holds the whole queue back now, and until when. */
function Status({ queue }: { queue: QueueInfo }) {
  const heldUntil = queue.rateLimitedUntilMillis ?? null;
  return (
    <>
      {queue.paused ? <span class="badge state-retry_wait">paused</span> : 'serving'}
      {heldUntil !== null && (
        <div class="muted small" data-testid="queue-held" data-until={heldUntil}>
          held by a handler until {formatTime(heldUntil)}
        </div>
      )}
    </>
  );
}

/** The groups a handler holds back (`group` scope), soonest free first. */
function HeldGroups({ queue }: { queue: QueueInfo }) {
  const held = queue.heldGroups ?? [];
  if (held.length === 0) return null;
  return (
    <tr class="queue-groups" data-testid="queue-held-groups" data-queue={queue.name}>
      <td colSpan={7}>
        <span class="muted">Groups held by a handler: </span>
        {held.map((g) => (
          <span
            key={g.groupKey ?? ''}
            class="chip"
            data-testid="held-group"
            data-group={g.groupKey ?? ''}
            data-until={g.untilMillis}
          >
            <span class="mono">{g.groupKey ?? '(no group)'}</span> until {formatTime(g.untilMillis)}
          </span>
        ))}
      </td>
    </tr>
  );
}

function QueueRow({ queue, onAction }: { queue: QueueInfo; onAction: (q: QueueInfo) => void }) {
  return (
    <>
      <tr data-testid="queue-row" data-queue={queue.name} data-paused={String(queue.paused)}>
        <td class="mono">{queue.name}</td>
        <td>
          <Status queue={queue} />
        </td>
        <td>
          <Counts queue={queue} />
        </td>
        <td data-testid="queue-running">{queue.running ?? 0}</td>
        <td data-testid="queue-concurrency">
          {limitText(queue.concurrency)}
          {queue.groupConcurrency !== null && (
            <span class="muted"> · {queue.groupConcurrency} per group</span>
          )}
        </td>
        <td data-testid="queue-rate">
          {rateText(queue.rateLimit)}
          {queue.groupRateLimit !== null && (
            <span class="muted"> · {rateText(queue.groupRateLimit)} per group</span>
          )}
        </td>
        <td>
          <button
            type="button"
            class={queue.paused ? 'primary' : 'danger-outline'}
            onClick={() => onAction(queue)}
            data-testid={queue.paused ? 'queue-resume' : 'queue-pause'}
          >
            {queue.paused ? 'Resume' : 'Pause'}
          </button>
        </td>
      </tr>
      <Groups queue={queue} />
      <HeldGroups queue={queue} />
    </>
  );
}

function PauseDialog({
  queue,
  onClose,
  onDone,
}: {
  queue: QueueInfo;
  onClose: () => void;
  onDone: () => void;
}) {
  const pausing = !queue.paused;
  return (
    <ConfirmDialog
      title={pausing ? `Pause queue ${queue.name}?` : `Resume queue ${queue.name}?`}
      confirmLabel={pausing ? 'Pause it' : 'Resume it'}
      danger={pausing}
      onClose={onClose}
      onConfirm={async () => {
        await api.pauseQueue(queue.name, pausing);
        onDone();
      }}
    >
      {pausing ? (
        <p>
          No new attempt of this queue starts until it is resumed. Running attempts finish;
          submissions are still accepted and wait.
        </p>
      ) : (
        <p>Attempts of this queue start again, within its limits.</p>
      )}
    </ConfirmDialog>
  );
}

export function QueuesPage() {
  const { value, error, reload } = useReloaded(api.queues, RELOAD_MS);
  const [acting, setActing] = useState<QueueInfo | null>(null);
  return (
    <div class="queues-page" data-testid="queues-page">
      <h1>Queues</h1>
      {error !== null && <p class="error">{error}</p>}
      {value === undefined && error === null && <p class="muted">Loading…</p>}
      {value !== undefined &&
        (value.queues.length === 0 ? (
          <p class="muted empty">No queue has a job or a setting yet.</p>
        ) : (
          <table class="queues" data-testid="queues-table">
            <thead>
              <tr>
                <th>Queue</th>
                <th>Status</th>
                <th>Jobs by state</th>
                <th>Running</th>
                <th>Concurrency</th>
                <th>Rate</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {value.queues.map((q) => (
                <QueueRow key={q.name} queue={q} onAction={setActing} />
              ))}
            </tbody>
          </table>
        ))}
      {acting !== null && (
        <PauseDialog queue={acting} onClose={() => setActing(null)} onDone={reload} />
      )}
    </div>
  );
}
