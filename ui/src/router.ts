/**
 * Routes in the URL's hash, so the coordinator serves one page for all of
 * them: `#/` overview, `#/jobs?state=&type=&search=`, `#/jobs/<id>`,
 * `#/workers`, `#/queues`, `#/schedules`.
 */
import { useEffect, useState } from 'preact/hooks';

export type Route =
  | { page: 'overview' }
  | { page: 'jobs'; params: URLSearchParams }
  | { page: 'job'; jobId: string }
  | { page: 'workers' }
  | { page: 'queues' }
  | { page: 'schedules' };

export function parseRoute(hash: string): Route {
  const text = hash.replace(/^#/, '') || '/';
  const [path = '/', query = ''] = text.split('?', 2);
  const job = /^\/jobs\/(.+)$/.exec(path);
  if (job !== null) return { page: 'job', jobId: decodeURIComponent(job[1] as string) };
  if (path === '/jobs') return { page: 'jobs', params: new URLSearchParams(query) };
  if (path === '/workers') return { page: 'workers' };
  if (path === '/queues') return { page: 'queues' };
  if (path === '/schedules') return { page: 'schedules' };
  return { page: 'overview' };
}

export function jobHref(jobId: string): string {
  return `#/jobs/${encodeURIComponent(jobId)}`;
}

export function jobsHref(params: Record<string, string | undefined>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value) search.set(name, value);
  const text = search.toString();
  return text === '' ? '#/jobs' : `#/jobs?${text}`;
}

export function navigate(href: string): void {
  window.location.hash = href.replace(/^#/, '');
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(window.location.hash));
  useEffect(() => {
    const update = (): void => setRoute(parseRoute(window.location.hash));
    window.addEventListener('hashchange', update);
    return () => window.removeEventListener('hashchange', update);
  }, []);
  return route;
}
