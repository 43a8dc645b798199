/**
 * Live workers: slots in use, the jobs each runs, the age of its last
 * heartbeat (ticking between pushes), whether it is draining, and the task
 * types it declared. A worker may hold up to 10,000 attempts: the slot bar
 * has at most {@link SLOT_BOXES} boxes (each then stands for a share of the
 * slots) and at most {@link JOB_CHIPS} running jobs are linked, so a row
 * costs the same whatever the worker's size.
 */
import { api } from '../api.js';
import { formatAge, shortId } from '../format.js';
import { useLiveValue, useNow } from '../hooks.js';
import { jobHref } from '../router.js';

/** Most boxes in a worker's slot bar. */
const SLOT_BOXES = 32;
/** Most running jobs linked per worker; the rest are counted. */
const JOB_CHIPS = 20;

/** How many of the bar's boxes are busy: each box is a share of the slots, busy when any of it is. */
function busyBoxes(activeTasks: number, capacity: number, boxes: number): number {
  return capacity <= boxes ? activeTasks : Math.ceil((activeTasks * boxes) / capacity);
}

export function WorkersPage() {
  const { value, error } = useLiveValue('workers', api.workers);
  const now = useNow();
  if (error !== null) return <p class="error">{error}</p>;
  if (value === undefined) return <p class="muted">Loading…</p>;
  // Ages grow between pushes: the server's age plus the time since it answered.
  const skew = now - value.nowMillis;
  return (
    <div class="workers-page">
      <h1>Workers</h1>
      {value.workers.length === 0 ? (
        <p class="muted empty">No worker is connected.</p>
      ) : (
        <table class="workers" data-testid="workers-table">
          <thead>
            <tr>
              <th>Worker</th>
              <th>Slots</th>
              <th>Running jobs</th>
              <th>Last heartbeat</th>
              <th>Draining</th>
              <th>Task types</th>
            </tr>
          </thead>
          <tbody>
            {value.workers.map((w) => (
              <tr key={w.workerId} data-testid="worker-row" data-worker-id={w.workerId}>
                <td class="mono">{w.workerId}</td>
                <td>
                  <span class="slots">
                    {Array.from({ length: Math.min(w.capacity, SLOT_BOXES) }, (_, i) => (
                      <i
                        key={i}
                        class={i < busyBoxes(w.activeTasks, w.capacity, SLOT_BOXES) ? 'busy' : ''}
                      />
                    ))}
                  </span>{' '}
                  {w.activeTasks}/{w.capacity}
                  {(w.queuedTasks ?? 0) > 0 && (
                    <span class="muted" data-testid="worker-queued">
                      {' '}
                      +{w.queuedTasks} queued
                    </span>
                  )}
                </td>
                <td>
                  {(w.runningJobs ?? []).slice(0, JOB_CHIPS).map((id) => (
                    <a key={id} href={jobHref(id)} class="mono chip" title={id}>
                      {shortId(id)}
                    </a>
                  ))}
                  {(w.runningJobs ?? []).length > JOB_CHIPS && (
                    <span class="muted" data-testid="worker-more-jobs">
                      {' '}
                      +{(w.runningJobs ?? []).length - JOB_CHIPS} more
                    </span>
                  )}
                </td>
                <td>{formatAge(w.heartbeatAgeMillis + Math.max(0, skew))}</td>
                <td>
                  {w.draining === true ? (
                    <span class="badge state-retry_wait">draining</span>
                  ) : (
                    'no'
                  )}
                </td>
                <td>{w.taskTypes == null ? 'built-ins' : w.taskTypes.join(', ')}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
