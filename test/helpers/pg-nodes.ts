/**
 * Coordinators sharing one PostgreSQL database, started through the scripts
 * as separate processes with short leases (a takeover within about two
 * seconds), and how to tell which one leads: its `/healthz`.
 */
import { startCoordinatorProcess, type ScriptProcess } from './processes.js';
import { until } from './until.js';

export const LEASE_TTL_MS = 2_000;
export const RENEW_MS = 400;

export interface PgNode {
  proc: ScriptProcess;
  workerPort: number;
  clientPort: number;
  httpPort: number;
}

/**
 * Starts a coordinator on `database` (on `ports` when it comes back after a
 * kill) and adds its process to `procs`, which the caller stops.
 */
export async function startPgNode(
  database: string,
  procs: ScriptProcess[],
  ports?: Omit<PgNode, 'proc'>,
): Promise<PgNode> {
  const args = [
    '--database',
    database,
    '--lease-ttl-millis',
    String(LEASE_TTL_MS),
    '--lease-renew-interval-millis',
    String(RENEW_MS),
    '--heartbeat-timeout-millis',
    '1500',
    '--retry-base-delay-millis',
    '50',
    '--max-attempts',
    '20',
    '--metrics-port',
    String(ports?.httpPort ?? 0),
  ];
  const started = await startCoordinatorProcess(args, ports ?? { workerPort: 0, clientPort: 0 });
  procs.push(started.proc);
  const http = await started.proc.waitForOutput(/metricsPort"?[=:](\d+)/);
  return { ...started, httpPort: Number(http[1]) };
}

/** The node's `/healthz`: 200 while it leads, 503 as a standby, 0 when it does not answer. */
export async function health(node: PgNode): Promise<{ status: number; epoch: number | null }> {
  try {
    const response = await fetch(`http://127.0.0.1:${node.httpPort}/healthz`, {
      signal: AbortSignal.timeout(500),
    });
    const body = (await response.json()) as { epoch?: number };
    return { status: response.status, epoch: body.epoch ?? null };
  } catch {
    return { status: 0, epoch: null };
  }
}

/** Waits until `node` serves as leader with an epoch above `aboveEpoch`; returns the epoch. */
export async function leads(node: PgNode, aboveEpoch: number, timeoutMs = 15_000): Promise<number> {
  return until(
    async () => {
      const h = await health(node);
      return h.status === 200 && (h.epoch ?? 0) > aboveEpoch ? h.epoch : null;
    },
    { timeoutMs, intervalMs: 20, what: `coordinator on ${node.clientPort} to lead` },
  );
}
