/** Hooks shared by the pages. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { live, type LiveEventName, type LiveEvents } from './live.js';

/**
 * The latest value of a live event, loaded first with `load()` so the page
 * is filled before the first push arrives.
 */
export function useLiveValue<K extends 'overview' | 'workers'>(
  name: K,
  load: () => Promise<LiveEvents[K]>,
): { value: LiveEvents[K] | undefined; error: string | null } {
  const [value, setValue] = useState<LiveEvents[K] | undefined>(live.latest(name));
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let current = true;
    load().then(
      // A push may have arrived meanwhile: keep whichever is newer.
      (v) =>
        current && setValue((old) => (old === undefined || v.nowMillis >= old.nowMillis ? v : old)),
      (err: unknown) => current && setError(String(err)),
    );
    const off = live.on(name, (v) => setValue(v));
    return () => {
      current = false;
      off();
    };
  }, [name]);
  return { value, error };
}

/**
 * Orders the answers of overlapping requests: `begin()` marks a new request and
 * returns a check that stays true only while no newer one was begun, so an
 * answer that arrives after a newer request's is dropped instead of shown.
 */
export function useLatestRequest(): () => () => boolean {
  const latest = useRef(0);
  return () => {
    const seq = ++latest.current;
    return () => seq === latest.current;
  };
}

/** Subscribes to a live event for the component's lifetime. */
export function useLive<K extends LiveEventName>(
  name: K,
  listener: (data: LiveEvents[K]) => void,
): void {
  const ref = useRef(listener);
  ref.current = listener;
  useEffect(() => live.on(name, (data) => ref.current(data)), [name]);
}

/** The current time, advancing every `periodMs` (for ages that grow between pushes). */
export function useNow(periodMs = 1_000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = window.setInterval(() => setNow(Date.now()), periodMs);
    return () => window.clearInterval(timer);
  }, [periodMs]);
  return now;
}

/**
 * A function that runs `fn` at most once per `delayMs`, trailing: many live
 * events in a burst cause one reload.
 */
export function useThrottled(fn: () => void, delayMs: number): () => void {
  const ref = useRef(fn);
  ref.current = fn;
  const timer = useRef<number | null>(null);
  useEffect(
    () => () => {
      if (timer.current !== null) window.clearTimeout(timer.current);
    },
    [],
  );
  return () => {
    if (timer.current !== null) return;
    timer.current = window.setTimeout(() => {
      timer.current = null;
      ref.current();
    }, delayMs);
  };
}

/**
 * A document the page loads with `load()` and loads again while it is shown:
 * on a live push (the overview's, every second) once `periodMs` have passed
 * since the last load, and at once on `reload()` (after an action). Answers
 * are ordered: one older than the newest request is dropped.
 */
export function useReloaded<T>(
  load: () => Promise<T>,
  periodMs: number,
): { value: T | undefined; error: string | null; reload: () => void } {
  const [value, setValue] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const begin = useLatestRequest();
  const lastLoadMs = useRef(0);
  const reload = (): void => {
    lastLoadMs.current = Date.now();
    const current = begin();
    load().then(
      (v) => {
        if (!current()) return;
        setValue(v);
        setError(null);
      },
      (err: unknown) => current() && setError(err instanceof Error ? err.message : String(err)),
    );
  };
  useEffect(reload, []);
  useLive('overview', () => {
    if (Date.now() - lastLoadMs.current >= periodMs) reload();
  });
  return { value, error, reload };
}
