/**
 * Paging for coordinators that do not page.
 *
 * `limit`, `state` and `cursor` of LIST_JOBS are optional fields that a v1
 * coordinator ignores: it answers with every job, newest first, in one
 * JOB_LIST. That shows in its reply (more jobs than the limit, or jobs in
 * other states), and then the reply holds everything, so the client pages it
 * itself: it filters by state, starts after its own cursor and cuts the page
 * at the limit. Its cursors carry a prefix that a coordinator's never has, so
 * that a later page is cut from a fresh full list the same way. A v1 reply
 * that happens to fit the query (no more jobs than the limit, all in the
 * state asked for) is already the right answer.
 */
import type { JobSnapshot, JobState } from '../protocol/messages.js';

export interface ListQuery {
  /** Page size (default: the coordinator's page; locally: everything). */
  limit?: number;
  /** Only jobs in this state. */
  state?: JobState;
  /** The `nextCursor` of the previous page. */
  cursor?: string;
  /** Only jobs of this named queue. */
  queue?: string;
}

export interface JobPage {
  /** Newest first. */
  jobs: JobSnapshot[];
  /** Null on the last page. */
  nextCursor: string | null;
}

/** Marks a cursor made by this client (never one of a coordinator's). */
const LOCAL_CURSOR_PREFIX = 'dtp-local:';

/** True for a cursor this client made while paging a v1 reply itself. */
export function isLocalCursor(cursor: string | undefined): boolean {
  return cursor !== undefined && cursor.startsWith(LOCAL_CURSOR_PREFIX);
}

function localCursorAfter(job: JobSnapshot): string {
  return `${LOCAL_CURSOR_PREFIX}${job.createdAtMillis}:${job.jobId}`;
}

/** True when the reply shows that the coordinator ignored the query's limit or state. */
export function queryIgnored(query: ListQuery, jobs: readonly JobSnapshot[]): boolean {
  if (query.limit !== undefined && jobs.length > query.limit) return true;
  return query.state !== undefined && jobs.some((job) => job.state !== query.state);
}

/** Where the page after `cursor` starts in `jobs` (newest first). */
function startAfter(jobs: readonly JobSnapshot[], cursor: string): number {
  const body = cursor.slice(LOCAL_CURSOR_PREFIX.length);
  const colon = body.indexOf(':');
  const createdAtMillis = Number(body.slice(0, colon));
  const jobId = body.slice(colon + 1);
  const index = jobs.findIndex((job) => job.jobId === jobId);
  if (index >= 0) return index + 1;
  // The job is gone: continue with the first one created before it.
  const older = jobs.findIndex((job) => job.createdAtMillis < createdAtMillis);
  return older >= 0 ? older : jobs.length;
}

/** The page `query` asks for, cut from `all` (every job, newest first). */
export function pageLocally(all: readonly JobSnapshot[], query: ListQuery): JobPage {
  const matching = query.state === undefined ? all : all.filter((j) => j.state === query.state);
  const from =
    query.cursor !== undefined && isLocalCursor(query.cursor)
      ? startAfter(matching, query.cursor)
      : 0;
  const to =
    query.limit === undefined ? matching.length : Math.min(matching.length, from + query.limit);
  const jobs = matching.slice(from, to);
  const last = jobs[jobs.length - 1];
  const nextCursor = to < matching.length && last !== undefined ? localCursorAfter(last) : null;
  return { jobs, nextCursor };
}
