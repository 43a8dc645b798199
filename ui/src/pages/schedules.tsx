/**
 * The recurring schedules, and below them the event triggers
 * (components/triggers.tsx). Schedules: cadence (cron with its time zone, or a fixed
 * interval), whether a live worker serves the task type, the next runs with a countdown to the first, whether paused,
 * the last job and its state; pause, resume and trigger behind a
 * confirmation. Reloaded while shown (every two seconds, on the live
 * overview push), at once when a last job shown changes state, and after an
 * action.
 */
import { useState } from 'preact/hooks';
import { api, type ScheduleView } from '../api.js';
import { StateBadge } from '../components/badges.js';
import { ConfirmDialog } from '../components/confirm.js';
import { TriggersSection } from '../components/triggers.js';
import {
  browserTimeZone,
  formatCountdown,
  formatDurationMs,
  formatTimeIn,
  isKnownTimeZone,
  shortId,
} from '../format.js';
import { useLive, useNow, useReloaded, useThrottled } from '../hooks.js';
import { jobHref } from '../router.js';

const RELOAD_MS = 2_000;

type Action = 'pause' | 'resume' | 'trigger';

function Cadence({ schedule }: { schedule: ScheduleView }) {
  if (schedule.cron !== null) {
    return (
      <>
        <span class="mono">{schedule.cron}</span>{' '}
        <span class="muted">({schedule.timezone ?? 'UTC'})</span>
      </>
    );
  }
  return <>every {formatDurationMs(schedule.everyMillis ?? 0)}</>;
}

/** The zone a schedule's times are shown in, and its name as shown beside them. */
interface ShownZone {
  zone: string;
  label: string;
}

/** The schedule's own zone; an interval has none: the browser's, said to be so. */
function shownZone(schedule: ScheduleView): ShownZone {
  const own = schedule.timezone;
  if (own !== null && isKnownTimeZone(own)) return { zone: own, label: own };
  const browser = browserTimeZone();
  const label = own === null ? `${browser}, this browser's zone` : `${browser}, not ${own}`;
  return { zone: browser, label };
}

/** A time in the shown zone; the browser's reading of it on hover. */
function When({ ms, zone }: { ms: number | null; zone: ShownZone }) {
  const browser = browserTimeZone();
  return (
    <span title={`${formatTimeIn(ms, browser)} in this browser's zone (${browser})`}>
      {formatTimeIn(ms, zone.zone)}
    </span>
  );
}

function ZoneLabel({ zone }: { zone: ShownZone }) {
  return (
    <span class="muted" data-testid="schedule-zone">
      {zone.label}
    </span>
  );
}

function NextRuns({ schedule, nowMs }: { schedule: ScheduleView; nowMs: number }) {
  const [first, ...rest] = schedule.nextRunsAtMillis;
  if (first === undefined) return <span class="muted">-</span>;
  const zone = shownZone(schedule);
  return (
    <div data-testid="schedule-next-runs" data-next={first}>
      <span data-testid="schedule-next">
        <When ms={first} zone={zone} />
      </span>{' '}
      <ZoneLabel zone={zone} />{' '}
      <span class="muted" data-testid="schedule-countdown">
        {formatCountdown(first - nowMs)}
      </span>
      {rest.length > 0 && (
        <div class="muted small" data-testid="schedule-then">
          then{' '}
          {rest.map((at, i) => (
            <span key={at}>
              {i > 0 && ', '}
              <When ms={at} zone={zone} />
            </span>
          ))}
        </div>
      )}
    </div>
  );
}

function LastJob({ schedule }: { schedule: ScheduleView }) {
  if (schedule.lastJobId === null) return <span class="muted">none yet</span>;
  return (
    <span data-testid="schedule-last-job" data-job-id={schedule.lastJobId}>
      <a href={jobHref(schedule.lastJobId)} class="mono" title={schedule.lastJobId}>
        {shortId(schedule.lastJobId)}
      </a>{' '}
      {schedule.lastJobState !== null && <StateBadge state={schedule.lastJobState} />}{' '}
      <span class="muted" data-testid="schedule-last-run">
        <When ms={schedule.lastRunAtMillis} zone={shownZone(schedule)} />
      </span>{' '}
      <ZoneLabel zone={shownZone(schedule)} />
    </span>
  );
}

function ActionDialog({
  schedule,
  action,
  onClose,
  onDone,
}: {
  schedule: ScheduleView;
  action: Action;
  onClose: () => void;
  onDone: (message: string, jobId: string | null) => void;
}) {
  const { name } = schedule;
  const text: Record<Action, [string, string, string]> = {
    pause: [
      `Pause schedule ${name}?`,
      'Pause it',
      'No tick makes a job until it is resumed; ticks that pass meanwhile are skipped, not caught up. Jobs it made already are not touched.',
    ],
    resume: [
      `Resume schedule ${name}?`,
      'Resume it',
      'Its next tick is computed from now; ticks that passed while it was paused are not caught up.',
    ],
    trigger: [
      `Trigger schedule ${name} now?`,
      'Submit a job now',
      `One ${schedule.taskType} job is submitted now, outside the cadence (also while paused). The next tick is not moved.`,
    ],
  };
  const [title, label, body] = text[action];
  return (
    <ConfirmDialog
      title={title}
      confirmLabel={label}
      danger={action === 'pause'}
      onClose={onClose}
      onConfirm={async () => {
        if (action === 'trigger') {
          const { jobId } = await api.triggerSchedule(name);
          onDone(`Triggered ${name}: job ${jobId}.`, jobId);
        } else {
          await api.pauseSchedule(name, action === 'pause');
          onDone(`${action === 'pause' ? 'Paused' : 'Resumed'} ${name}.`, null);
        }
      }}
    >
      <p>{body}</p>
    </ConfirmDialog>
  );
}

function ScheduleRow({
  schedule,
  nowMs,
  onAction,
}: {
  schedule: ScheduleView;
  nowMs: number;
  onAction: (action: Action) => void;
}) {
  return (
    <tr
      data-testid="schedule-row"
      data-schedule={schedule.name}
      data-paused={String(schedule.paused)}
    >
      <td class="mono">{schedule.name}</td>
      <td>
        {schedule.taskType}
        {schedule.queue != null && schedule.queue !== 'default' && (
          <div class="muted small" data-testid="schedule-queue">
            queue {schedule.queue}
          </div>
        )}
        {!schedule.served && (
          <div class="muted small" data-testid="schedule-unserved">
            no live worker serves it: its jobs wait
          </div>
        )}
      </td>
      <td>
        <Cadence schedule={schedule} />
      </td>
      <td>
        {schedule.paused ? (
          <span class="badge state-retry_wait">paused</span>
        ) : (
          <NextRuns schedule={schedule} nowMs={nowMs} />
        )}
      </td>
      <td>
        <LastJob schedule={schedule} />
      </td>
      <td class="row-actions">
        <button
          type="button"
          class={schedule.paused ? 'primary' : 'danger-outline'}
          onClick={() => onAction(schedule.paused ? 'resume' : 'pause')}
          data-testid={schedule.paused ? 'schedule-resume' : 'schedule-pause'}
        >
          {schedule.paused ? 'Resume' : 'Pause'}
        </button>{' '}
        <button type="button" onClick={() => onAction('trigger')} data-testid="schedule-trigger">
          Trigger now
        </button>
      </td>
    </tr>
  );
}

export function SchedulesPage() {
  const { value, error, reload } = useReloaded(api.schedules, RELOAD_MS);
  const [acting, setActing] = useState<{ schedule: ScheduleView; action: Action } | null>(null);
  const [notice, setNotice] = useState<{ message: string; jobId: string | null } | null>(null);
  const now = useNow();
  const soon = useThrottled(reload, 300);
  useLive('jobs', (message) => {
    const shown = new Set(value?.schedules.map((s) => s.lastJobId));
    if (message.truncated || message.changes.some((c) => shown.has(c.jobId))) soon();
  });
  return (
    <div class="schedules-page" data-testid="schedules-page">
      <h1>Schedules</h1>
      {notice !== null && (
        <p class="notice" data-testid="notice">
          {notice.message}{' '}
          {notice.jobId !== null && <a href={jobHref(notice.jobId)}>Open the job</a>}
        </p>
      )}
      {error !== null && <p class="error">{error}</p>}
      {value === undefined && error === null && <p class="muted">Loading…</p>}
      {value !== undefined &&
        (value.schedules.length === 0 ? (
          <p class="muted empty">No schedule is defined.</p>
        ) : (
          <table class="schedules" data-testid="schedules-table">
            <thead>
              <tr>
                <th>Schedule</th>
                <th>Task type</th>
                <th>Cadence</th>
                <th>Next runs</th>
                <th>Last job</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {value.schedules.map((s) => (
                <ScheduleRow
                  key={s.name}
                  schedule={s}
                  nowMs={now}
                  onAction={(action) => setActing({ schedule: s, action })}
                />
              ))}
            </tbody>
          </table>
        ))}
      {acting !== null && (
        <ActionDialog
          schedule={acting.schedule}
          action={acting.action}
          onClose={() => setActing(null)}
          onDone={(message, jobId) => {
            setNotice({ message, jobId });
            reload();
          }}
        />
      )}
      <TriggersSection />
    </div>
  );
}
