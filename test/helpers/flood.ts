/**
 * Drives a flood-peer process (flood-peer.ts) from a test: start it, read its
 * progress, wait for a condition, stop it by PID.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import type { FloodPlan } from './flood-peer.js';
import { until } from './until.js';

export interface FloodStats {
  opened: number;
  closed: number;
  refused: number;
  errors: number;
  /** Connections whose writes the kernel took (modes that write once). */
  written?: number;
  /** Bytes the peers received. */
  received?: number;
}

export class Flood {
  readonly child: ChildProcess;
  stats: FloodStats = { opened: 0, closed: 0, refused: 0, errors: 0 };
  readonly exited: Promise<unknown>;

  private constructor(child: ChildProcess) {
    this.child = child;
    let buffer = '';
    child.stdout?.on('data', (d: Buffer) => {
      buffer += d.toString('utf8');
      const lines = buffer.split('\n');
      buffer = lines.pop() ?? '';
      const last = lines.at(-1);
      if (last !== undefined && last !== '') this.stats = JSON.parse(last) as FloodStats;
    });
    this.exited = once(child, 'exit');
  }

  static start(plan: FloodPlan): Flood {
    const script = join(import.meta.dirname, 'flood-peer.js');
    const child = spawn(process.execPath, [script, JSON.stringify(plan)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    return new Flood(child);
  }

  async until(
    predicate: (s: FloodStats) => boolean,
    what: string,
    timeoutMs = 30_000,
  ): Promise<void> {
    await until(() => predicate(this.stats), { timeoutMs, what, intervalMs: 20 });
  }

  /** Kills the process (its sockets close with it) and waits for it to go. */
  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    await this.exited;
  }
}

/** The resident set size of a process, in bytes (Linux /proc). */
export async function rssBytes(pid: number): Promise<number> {
  const { readFile } = await import('node:fs/promises');
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  if (match === null) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(match[1]) * 1024;
}
