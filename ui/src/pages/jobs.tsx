/**
 * The jobs table: filters (state, SCHEDULED included, and task type), the
 * time a delayed job runs at, search by job id or
 * idempotency key, cursor paging (newest first), live refresh of what is on
 * screen, and purge of old terminal jobs behind a confirmation.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import {
  JOB_STATES,
  TERMINAL_STATES,
  type JobState,
  type TerminalState,
} from '../../../src/protocol/messages.js';
import { api, type JobPage } from '../api.js';
import { ExpiredBadge, StateBadge } from '../components/badges.js';
import { ConfirmDialog } from '../components/confirm.js';
import { formatAttempts, formatTime, shortId } from '../format.js';
import { useLatestRequest, useLive, useThrottled } from '../hooks.js';
import { jobHref, jobsHref, navigate } from '../router.js';

export const PAGE_SIZE = 25;

interface Filters {
  state: JobState | undefined;
  type: string | undefined;
  search: string | undefined;
}

function filtersOf(params: URLSearchParams): Filters {
  const state = JOB_STATES.find((s) => s === params.get('state'));
  return {
    state,
    type: params.get('type') || undefined,
    search: params.get('search') || undefined,
  };
}

function FilterBar({ filters }: { filters: Filters }) {
  const [state, setState] = useState(filters.state ?? '');
  const [type, setType] = useState(filters.type ?? '');
  const [search, setSearch] = useState(filters.search ?? '');
  // Follow the route when it changes (Clear, back, a link), but not on the
  // first render: the fields start from it already, and a reset then could
  // wipe what was typed between the first paint and the effect.
  const shownKey = useRef(`${filters.state}|${filters.type}|${filters.search}`);
  useEffect(() => {
    const key = `${filters.state}|${filters.type}|${filters.search}`;
    if (shownKey.current === key) return;
    shownKey.current = key;
    setState(filters.state ?? '');
    setType(filters.type ?? '');
    setSearch(filters.search ?? '');
  }, [filters.state, filters.type, filters.search]);
  const apply = (event: Event): void => {
    event.preventDefault();
    navigate(
      jobsHref({
        state: state || undefined,
        type: type.trim() || undefined,
        search: search.trim() || undefined,
      }),
    );
  };
  return (
    <form class="filters" onSubmit={apply} data-testid="job-filters">
      <label>
        State
        <select
          name="state"
          value={state}
          onChange={(e) => setState((e.target as HTMLSelectElement).value)}
        >
          <option value="">any</option>
          {JOB_STATES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
      </label>
      <label>
        Task type
        <input
          name="type"
          value={type}
          placeholder="any"
          onInput={(e) => setType((e.target as HTMLInputElement).value)}
        />
      </label>
      <label class="grow">
        Search
        <input
          name="search"
          value={search}
          placeholder="job id or idempotency key"
          onInput={(e) => setSearch((e.target as HTMLInputElement).value)}
        />
      </label>
      <button type="submit" class="primary">
        Apply
      </button>
      <a class="button" href="#/jobs">
        Clear
      </a>
    </form>
  );
}

function PurgeButton({ onDone }: { onDone: (deleted: number) => void }) {
  const [open, setOpen] = useState(false);
  const [state, setState] = useState<TerminalState>('COMPLETED');
  const [olderThan, setOlderThan] = useState('7d');
  return (
    <>
      <button
        type="button"
        class="danger-outline"
        onClick={() => setOpen(true)}
        data-testid="purge-open"
      >
        Purge…
      </button>
      {open && (
        <ConfirmDialog
          title="Purge old jobs"
          confirmLabel="Delete them"
          danger
          onClose={() => setOpen(false)}
          onConfirm={async () => onDone((await api.purge(state, olderThan)).deleted)}
        >
          <p>
            Deletes {state} jobs, with their attempts, that finished more than the given time ago.
            Their idempotency keys are forgotten. Only terminal jobs can be purged.
          </p>
          <div class="form-row">
            <label>
              State
              <select
                name="purge-state"
                value={state}
                onChange={(e) => setState((e.target as HTMLSelectElement).value as TerminalState)}
              >
                {TERMINAL_STATES.map((s) => (
                  <option key={s} value={s}>
                    {s}
                  </option>
                ))}
              </select>
            </label>
            <label>
              Older than
              <input
                name="purge-older-than"
                value={olderThan}
                placeholder="30m, 12h, 7d"
                onInput={(e) => setOlderThan((e.target as HTMLInputElement).value)}
              />
            </label>
          </div>
        </ConfirmDialog>
      )}
    </>
  );
}

function JobTable({ page }: { page: JobPage }) {
  if (page.jobs.length === 0)
    return (
      <p class="muted empty" data-testid="no-jobs">
        No jobs match.
      </p>
    );
  return (
    <table class="jobs" data-testid="jobs-table">
      <thead>
        <tr>
          <th>Job</th>
          <th>Type</th>
          <th>State</th>
          <th>Priority</th>
          <th>Attempts</th>
          <th>Worker</th>
          <th>Runs at</th>
          <th>Submitted</th>
          <th>Updated</th>
        </tr>
      </thead>
      <tbody>
        {page.jobs.map((job) => (
          <tr key={job.jobId} data-testid="job-row" data-job-id={job.jobId} data-state={job.state}>
            <td>
              <a href={jobHref(job.jobId)} title={job.jobId} class="mono">
                {shortId(job.jobId)}
              </a>
            </td>
            <td>{job.taskType}</td>
            <td>
              <StateBadge state={job.state} /> <ExpiredBadge job={job} />
            </td>
            <td>{job.priority}</td>
            <td>{formatAttempts(job)}</td>
            <td class="mono">{job.workerId ?? '-'}</td>
            <td data-testid="job-run-at">{formatTime(job.runAtMillis)}</td>
            <td>{formatTime(job.createdAtMillis)}</td>
            <td>{formatTime(job.updatedAtMillis)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function JobsPage({ params }: { params: URLSearchParams }) {
  const filters = filtersOf(params);
  const key = `${filters.state ?? ''}|${filters.type ?? ''}|${filters.search ?? ''}`;
  /** Cursors of the pages walked through; the last one is the current page's. */
  const [cursors, setCursors] = useState<string[]>([]);
  const [page, setPage] = useState<JobPage | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const cursor = cursors.at(-1);

  const begin = useLatestRequest();
  const load = (): void => {
    const current = begin();
    api
      .jobs({ ...filters, cursor, limit: filters.search === undefined ? PAGE_SIZE : undefined })
      .then(
        (p) => {
          if (!current()) return;
          setPage(p);
          setError(null);
        },
        (err: unknown) => {
          if (!current()) return;
          setError(err instanceof Error ? err.message : String(err));
        },
      );
  };
  const reload = useThrottled(load, 300);
  useEffect(() => setCursors([]), [key]);
  useEffect(load, [key, cursor]);
  useLive('jobs', (message) => {
    if (page === null) return;
    const shown = new Set(page.jobs.map((j) => j.jobId));
    const fresh = cursor === undefined && filters.search === undefined;
    const relevant = message.changes.some(
      (c) =>
        shown.has(c.jobId) ||
        (fresh &&
          c.taskType !== undefined &&
          (filters.type === undefined || c.taskType === filters.type)),
    );
    if (relevant || message.truncated) reload();
  });
  useLive('purged', reload);

  return (
    <div class="jobs-page">
      <div class="page-head">
        <h1>Jobs</h1>
        <PurgeButton
          onDone={(deleted) => {
            setNotice(`Purged ${deleted} job${deleted === 1 ? '' : 's'}.`);
            load();
          }}
        />
      </div>
      <FilterBar filters={filters} />
      {notice !== null && (
        <p class="notice" data-testid="notice">
          {notice}
        </p>
      )}
      {error !== null && <p class="error">{error}</p>}
      {page !== null && <JobTable page={page} />}
      <div class="pager">
        <button type="button" disabled={cursors.length === 0} onClick={() => setCursors([])}>
          ⇤ Newest
        </button>
        <button
          type="button"
          disabled={cursors.length === 0}
          onClick={() => setCursors(cursors.slice(0, -1))}
          data-testid="page-newer"
        >
          ← Newer
        </button>
        <span class="muted" data-testid="page-number">
          page {cursors.length + 1}
        </span>
        <button
          type="button"
          disabled={page?.nextCursor == null}
          onClick={() => page?.nextCursor != null && setCursors([...cursors, page.nextCursor])}
          data-testid="page-older"
        >
          Older →
        </button>
      </div>
    </div>
  );
}
