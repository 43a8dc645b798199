/**
 * Attacks on the coordinator's HTTP port, with its defaults, on a
 * coordinator process of its own; what a liveness probe sees meanwhile:
 *
 * - an idle flood: 500 connections from 127.0.0.2 that send nothing (more
 *   than the port's total and four times its per-address share);
 * - slowloris floods: connections from 127.0.0.2 that each send a request
 *   line and then a header byte every 100 ms, reopened as soon as the
 *   coordinator closes them: 200 for 20 s (more than the address's share:
 *   they evict each other), and 60 for 12 s (within it: the header deadline
 *   closes them);
 * - a stalled body: a POST that declares 100 bytes and sends 4; how long the
 *   coordinator holds it.
 *
 * Probes are `GET /healthz` with a 2 s timeout, every 250 ms, alternately
 * from the flooding address and from 127.0.0.1. Bounded in connections and
 * time; loopback only.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { HttpFlood, type HttpFloodPlan } from '../test/helpers/http-flood.js';
import { startCoordinatorProcess } from '../test/helpers/processes.js';
import { healthz, rawHttp } from '../test/helpers/raw-http.js';
import { median } from './harness.js';

const FLOOD_FROM = '127.0.0.2';
const PROBE_FROM = ['127.0.0.2', '127.0.0.1'];
const PROBE_EVERY_MS = 250;
const PROBE_TIMEOUT_MS = 2_000;

export interface ProbeFigures {
  label: string;
  answered: number;
  probes: number;
  medianMs: number;
  maxMs: number;
}

export interface HttpAttackFigures {
  probes: ProbeFigures[];
  /** Median lifetime of a slowloris connection, in ms, per flood. */
  slowlorisLifetimes: { label: string; medianMs: number }[];
  /** How long a stalled body was held before the coordinator closed it, in ms (null: not run). */
  stalledBodyHeldMs: number | null;
}

/** Probes /healthz for `durationMs`; a probe that fails or times out counts as not answered. */
async function probe(port: number, label: string, durationMs: number): Promise<ProbeFigures> {
  const times: number[] = [];
  let probes = 0;
  const until = performance.now() + durationMs;
  for (let i = 0; performance.now() < until; i++) {
    const started = performance.now();
    const localAddress = PROBE_FROM[i % PROBE_FROM.length] as string;
    const status = await healthz(port, { localAddress, timeoutMs: PROBE_TIMEOUT_MS });
    probes++;
    if (status === 200) times.push(performance.now() - started);
    await sleep(Math.max(0, PROBE_EVERY_MS - (performance.now() - started)));
  }
  return {
    label,
    answered: times.length,
    probes,
    medianMs: times.length === 0 ? Number.NaN : median(times),
    maxMs: times.length === 0 ? Number.NaN : Math.max(...times),
  };
}

async function underFlood(
  port: number,
  label: string,
  plan: Omit<HttpFloodPlan, 'port'>,
  durationMs: number,
): Promise<{ figures: ProbeFigures; flood: HttpFlood }> {
  const flood = HttpFlood.start({ port, ...plan });
  try {
    await sleep(200); // the flood is in
    return { figures: await probe(port, label, durationMs), flood };
  } finally {
    flood.stop();
  }
}

/** `scale` < 1 shrinks counts and durations (a smoke run) and skips the stalled body. */
export async function httpAttacks(scale = 1): Promise<HttpAttackFigures> {
  const c = await startCoordinatorProcess(['--database', ':memory:', '--http-port', '0']);
  try {
    const port = Number((await c.proc.waitForOutput(/httpPort"?[=:](\d+)/))[1]);
    const idleCount = Math.max(10, Math.round(500 * scale));
    const idle = await underFlood(
      port,
      `${idleCount} idle connections from one address`,
      { localAddress: FLOOD_FROM, mode: 'idle', count: idleCount },
      Math.max(1_000, Math.round(10_000 * scale)),
    );
    const probes = [await probe(port, 'no attack', 2_000), idle.figures];
    const slowlorisLifetimes: HttpAttackFigures['slowlorisLifetimes'] = [];
    for (const [count, seconds] of [
      [200, 20],
      [60, 12],
    ] as const) {
      const n = Math.max(10, Math.round(count * scale));
      const ms = Math.max(1_000, Math.round(seconds * 1_000 * scale));
      const label = `${n} reconnecting slowloris connections from one address, ${ms / 1_000} s`;
      const plan = {
        localAddress: FLOOD_FROM,
        mode: 'slowloris',
        count: n,
        reconnect: true,
      } as const;
      const loris = await underFlood(
        port,
        label,
        { ...plan, intervalMs: 100, maxOpens: n * 20 },
        ms,
      );
      probes.push(loris.figures);
      const lifetimes = loris.flood.stats.lifetimesMs;
      if (lifetimes.length > 0)
        slowlorisLifetimes.push({ label: `${n}`, medianMs: median(lifetimes) });
    }
    return {
      probes,
      slowlorisLifetimes,
      stalledBodyHeldMs: scale < 1 ? null : await stalledBody(port),
    };
  } finally {
    await c.proc.stop();
  }
}

async function stalledBody(port: number): Promise<number> {
  const started = performance.now();
  await rawHttp(
    port,
    'POST /api/purge HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
      'Content-Length: 100\r\n\r\n{"st',
    { end: false, timeoutMs: 120_000 },
  );
  return performance.now() - started;
}

/** The figures as Markdown table lines. */
export function httpAttackTable(f: HttpAttackFigures): string[] {
  const row = (cells: (string | number)[]): string => `| ${cells.join(' | ')} |`;
  const ms = (v: number): string => (Number.isNaN(v) ? '-' : v.toFixed(1));
  const lines = [
    row(['HTTP port, defaults: /healthz probes during', 'answered', 'median ms', 'max ms']),
    row(['---', '---', '---', '---']),
  ];
  for (const p of f.probes)
    lines.push(row([p.label, `${p.answered}/${p.probes}`, ms(p.medianMs), ms(p.maxMs)]));
  for (const l of f.slowlorisLifetimes) {
    const label = `one of ${l.label} slowloris connections lived (median, ms)`;
    lines.push(row([label, '', ms(l.medianMs), '']));
  }
  if (f.stalledBodyHeldMs !== null) {
    lines.push(row(['a stalled body was held (ms)', '', ms(f.stalledBodyHeldMs), '']));
  }
  return lines;
}
