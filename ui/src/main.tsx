/**
 * The dashboard: a token prompt when the coordinator has client tokens, then
 * the pages (overview, jobs, one job, workers, queues, schedules) under one
 * live connection.
 */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, setUnauthenticatedHandler, type SessionState } from './api.js';
import { live, type LiveStatus } from './live.js';
import { JobPage } from './pages/job.js';
import { JobsPage } from './pages/jobs.js';
import { OverviewPage } from './pages/overview.js';
import { QueuesPage } from './pages/queues.js';
import { SchedulesPage } from './pages/schedules.js';
import { WorkersPage } from './pages/workers.js';
import { useRoute, type Route } from './router.js';
import './style.css';

/**
 * `?snapshot` in the address: the page as it is when it loads, without the
 * live connection, for a picture taken by a headless browser. An open event
 * stream is a request that never ends, and the virtual time of a headless
 * Chromium (`--virtual-time-budget`, which lets the page load its data
 * before the picture) does not move while a request is open.
 */
const SNAPSHOT = new URLSearchParams(window.location.search).has('snapshot');

function TokenForm({ onDone }: { onDone: () => void }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<string | null>(null);
  const submit = (event: Event): void => {
    event.preventDefault();
    api.login(token).then(
      () => onDone(),
      (err: unknown) => setError(err instanceof ApiError ? err.message : String(err)),
    );
  };
  return (
    <main class="login">
      <form onSubmit={submit} data-testid="token-form">
        <h1>dtp</h1>
        <p>This coordinator needs a client token.</p>
        <input
          type="password"
          name="token"
          autoComplete="current-password"
          placeholder="client token"
          value={token}
          onInput={(e) => setToken((e.target as HTMLInputElement).value)}
        />
        <button type="submit" disabled={token === ''}>
          Open the dashboard
        </button>
        {error !== null && <p class="error">{error}</p>}
      </form>
    </main>
  );
}

function Page({ route }: { route: Route }) {
  switch (route.page) {
    case 'overview':
      return <OverviewPage />;
    case 'jobs':
      return <JobsPage params={route.params} />;
    case 'job':
      return <JobPage jobId={route.jobId} />;
    case 'workers':
      return <WorkersPage />;
    case 'queues':
      return <QueuesPage />;
    case 'schedules':
      return <SchedulesPage />;
  }
}

function Dashboard({ session, onLogout }: { session: SessionState; onLogout: () => void }) {
  const route = useRoute();
  const [status, setStatus] = useState<LiveStatus>(live.status);
  useEffect(() => {
    if (SNAPSHOT) return;
    live.start();
    const off = live.onStatus(setStatus);
    return () => {
      off();
      live.stop();
    };
  }, []);
  const tab = route.page === 'job' ? 'jobs' : route.page;
  return (
    <>
      <header class="top">
        <a class="brand" href="#/">
          dtp
        </a>
        <nav>
          <a href="#/" class={tab === 'overview' ? 'active' : ''}>
            Overview
          </a>
          <a href="#/jobs" class={tab === 'jobs' ? 'active' : ''}>
            Jobs
          </a>
          <a href="#/workers" class={tab === 'workers' ? 'active' : ''}>
            Workers
          </a>
          <a href="#/queues" class={tab === 'queues' ? 'active' : ''}>
            Queues
          </a>
          <a href="#/schedules" class={tab === 'schedules' ? 'active' : ''}>
            Schedules
          </a>
        </nav>
        {SNAPSHOT ? (
          <span class="live-status" data-testid="live-status">
            ○ snapshot, not live
          </span>
        ) : (
          <span class={`live-status ${status}`} data-testid="live-status">
            {status === 'live'
              ? '● live'
              : status === 'connecting'
                ? '○ connecting'
                : '○ reconnecting'}
          </span>
        )}
        {session.authRequired && (
          <button class="link" onClick={onLogout}>
            Log out
          </button>
        )}
      </header>
      <main class="content">
        <Page route={route} />
      </main>
    </>
  );
}

function App() {
  const [session, setSession] = useState<SessionState | null>(null);
  const [error, setError] = useState<string | null>(null);
  const refresh = (): void => {
    api.session().then(setSession, (err: unknown) => setError(String(err)));
  };
  useEffect(() => {
    setUnauthenticatedHandler(() => setSession({ authRequired: true, authenticated: false }));
    refresh();
  }, []);
  if (error !== null) return <p class="error">Cannot reach the coordinator: {error}</p>;
  if (session === null) return <p class="muted">Loading…</p>;
  if (!session.authenticated) return <TokenForm onDone={refresh} />;
  const logout = (): void => {
    void api.logout().finally(refresh);
  };
  return <Dashboard session={session} onLogout={logout} />;
}

const root = document.getElementById('app');
if (root !== null) render(<App />, root);
