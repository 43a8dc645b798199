/**
 * The triggers, as a section of the Schedules page: each makes one job of
 * its task type (in its queue, with its priority and attempts) for every
 * event of its name, with the event's payload. Reloaded while shown, like
 * the schedules.
 */
import { api } from '../api.js';
import { formatTime } from '../format.js';
import { useReloaded } from '../hooks.js';

const RELOAD_MS = 5_000;

export function TriggersSection() {
  const { value, error } = useReloaded(api.triggers, RELOAD_MS);
  return (
    <section data-testid="triggers-section">
      <h2>Triggers</h2>
      {error !== null && <p class="error">{error}</p>}
      {value === undefined && error === null && <p class="muted">Loading…</p>}
      {value !== undefined &&
        (value.triggers.length === 0 ? (
          <p class="muted empty" data-testid="no-triggers">
            No trigger is defined (<span class="mono">client.sh trigger set</span> makes one).
          </p>
        ) : (
          <table class="triggers" data-testid="triggers-table">
            <thead>
              <tr>
                <th>Trigger</th>
                <th>On event</th>
                <th>Task type</th>
                <th>Queue</th>
                <th>Priority</th>
                <th>Max attempts</th>
                <th>Updated</th>
              </tr>
            </thead>
            <tbody>
              {value.triggers.map((t) => (
                <tr key={t.name} data-testid="trigger-row" data-name={t.name}>
                  <td class="mono">{t.name}</td>
                  <td class="mono">{t.event}</td>
                  <td>{t.taskType}</td>
                  <td>{t.queue}</td>
                  <td>{t.priority ?? 'NORMAL'}</td>
                  <td>{t.maxAttempts ?? <span class="muted">default</span>}</td>
                  <td>{formatTime(t.updatedAtMillis)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        ))}
    </section>
  );
}
