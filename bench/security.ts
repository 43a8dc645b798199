/**
 * What the security and hardening mechanisms cost and hold, measured on a
 * coordinator process of its own:
 *
 * - connect cost: a fresh client connection and one request, plain, with a
 *   token, with TLS, and with both (the handshake is the price of TLS);
 * - memory under storms from a flood-peer process: 1,500 connections that
 *   each declare a 1 MiB frame and send 1,000 bytes of it, then 300 that send
 *   64 KiB of garbage after a 1 MiB length and close; RSS before, during,
 *   after, and after three more rounds of both.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DtpClient } from '../src/client/index.js';
import { readClientTls, type ClientTls } from '../src/net/tls.js';
import { testCerts } from '../test/helpers/certs.js';
import { Flood, rssBytes } from '../test/helpers/flood.js';
import { startCoordinatorProcess } from '../test/helpers/processes.js';
import { HOST, median } from './harness.js';

const MIB = 1024 * 1024;
const TOKEN = 'bench-token-0123456789abcdef0123';

export interface ConnectCost {
  label: string;
  /** Median time of connect + LIST_WORKERS + close, in ms. */
  medianMs: number;
}

async function timeConnections(
  port: number,
  tls: ClientTls | null,
  token: string | null,
  count: number,
): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    const client = await DtpClient.connect({ host: HOST, port, tls, token });
    await client.workers();
    await client.close();
    times.push(performance.now() - started);
  }
  return median(times);
}

/** Connect cost with and without TLS and tokens; null when openssl is missing. */
export async function connectCosts(dir: string, count = 200): Promise<ConnectCost[] | null> {
  const certs = testCerts();
  if (certs === null) return null;
  const tokens = join(dir, 'bench-tokens');
  writeFileSync(tokens, `${TOKEN}\n`, { mode: 0o600 });
  const tls = readClientTls({ caFile: certs.caPem });
  const setups: [string, string[], ClientTls | null, string | null][] = [
    ['plain', [], null, null],
    ['token', ['--client-token-file', tokens], null, TOKEN],
    ['TLS', ['--tls-cert', certs.serverPem, '--tls-key', certs.serverKey], tls, null],
    [
      'TLS + token',
      ['--tls-cert', certs.serverPem, '--tls-key', certs.serverKey, '--client-token-file', tokens],
      tls,
      TOKEN,
    ],
  ];
  const out: ConnectCost[] = [];
  for (const [label, args, clientTls, token] of setups) {
    const c = await startCoordinatorProcess(['--database', ':memory:', ...args]);
    try {
      await timeConnections(c.clientPort, clientTls, token, 20); // warm-up
      out.push({ label, medianMs: await timeConnections(c.clientPort, clientTls, token, count) });
    } finally {
      await c.proc.stop();
    }
  }
  return out;
}

export interface StormMemory {
  baseMiB: number;
  halfFramesMiB: number;
  afterGarbageMiB: number;
  afterThreeMoreMiB: number;
}

/** `scale` shrinks the storms (a smoke run); 1 = the sizes above. */
export async function stormMemory(scale = 1): Promise<StormMemory> {
  const halfFrameCount = Math.max(1, Math.round(1_500 * scale));
  const garbageCount = Math.max(1, Math.round(300 * scale));
  const c = await startCoordinatorProcess(['--database', ':memory:']);
  const rss = async (): Promise<number> => Math.round((await rssBytes(c.proc.pid)) / MIB);
  const served = async (): Promise<void> => {
    const client = await DtpClient.connect({ host: HOST, port: c.clientPort });
    await client.workers();
    await client.close();
  };
  const flood = (plan: Omit<Parameters<typeof Flood.start>[0], 'port' | 'host'>): Flood =>
    Flood.start({ port: c.clientPort, host: HOST, localAddress: '127.0.0.2', ...plan });
  try {
    await served();
    const baseMiB = await rss();
    const halfFrames = async (): Promise<number> => {
      const f = flood({ mode: 'half-frame', bytes: 1_000, count: halfFrameCount, holdMs: 60_000 });
      await f.until((s) => s.opened >= halfFrameCount, 'half frames');
      await served();
      const during = await rss();
      await f.stop();
      return during;
    };
    const garbage = async (): Promise<void> => {
      const f = flood({
        mode: 'garbage',
        bytes: 65_536,
        declaredLength: MIB,
        count: garbageCount,
        holdMs: 60_000,
      });
      await f.until((s) => s.closed >= garbageCount, 'garbage');
      await f.stop();
      await served();
    };
    const halfFramesMiB = await halfFrames();
    await garbage();
    const afterGarbageMiB = await rss();
    for (let i = 0; i < 3; i++) {
      await halfFrames();
      await garbage();
    }
    return { baseMiB, halfFramesMiB, afterGarbageMiB, afterThreeMoreMiB: await rss() };
  } finally {
    await c.proc.stop();
  }
}
