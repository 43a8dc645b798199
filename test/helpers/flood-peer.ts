/**
 * A separate process that opens many connections to one port and misbehaves
 * on each, so that tests can flood a coordinator without spending their own
 * file descriptors. Run as
 *
 *     node dist/test/helpers/flood-peer.js '<json FloodPlan>'
 *
 * It writes one JSON line per progress report on stdout
 * (`{"opened":n,"closed":n,"refused":n,"errors":n}`) every 100 ms and when
 * done, and exits when every connection has closed or `holdMs` has passed
 * (then destroying the rest). Modes:
 * - `idle`: connect and send nothing;
 * - `trickle`: send one byte every `intervalMs` (a 1 MiB frame that never ends);
 * - `half-frame`: declare a 1 MiB frame, send `bytes` of it, then stall;
 * - `garbage`: send `bytes` random bytes (optionally starting with a length
 *   prefix of `declaredLength`) and close;
 * - `waits` (client port): send `waits` WAIT_JOB requests for `jobIds` in
 *   turn, each with `waitTimeoutMs`, in one write, then hold the connection
 *   (the replies are read and counted in `received` bytes);
 * - `subscribe` (client port): send `subscriptions` SUBSCRIBE_JOBS (every
 *   job's events) in one write, then hold the connection, reading what comes,
 *   or, with `stall`, nothing more once the first bytes came (a subscriber
 *   that stopped reading).
 * `written` counts connections whose writes the kernel has taken.
 */
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { encodeMessage } from '../../src/protocol/codec.js';

export interface FloodPlan {
  port: number;
  host: string;
  /** Source address, e.g. 127.0.0.2, so the flood comes from its own address. */
  localAddress?: string;
  mode: 'idle' | 'trickle' | 'half-frame' | 'garbage' | 'waits' | 'subscribe';
  count: number;
  /** Bytes per connection for `half-frame` and `garbage`. */
  bytes?: number;
  /** `garbage` only: start with a length prefix declaring this many bytes. */
  declaredLength?: number;
  intervalMs?: number;
  /** `waits` only: requests per connection, the jobs they name, and their timeout. */
  waits?: number;
  jobIds?: string[];
  waitTimeoutMs?: number;
  /** `subscribe` only: subscriptions per connection (default 1), and whether to stop reading. */
  subscriptions?: number;
  stall?: boolean;
  /** Give up after this long, in ms. */
  holdMs: number;
}

function run(plan: FloodPlan): void {
  const stats = { opened: 0, closed: 0, refused: 0, errors: 0, written: 0, received: 0 };
  const sockets = new Set<Socket>();
  const report = (): void => void process.stdout.write(`${JSON.stringify(stats)}\n`);
  const ticker = setInterval(report, 100);
  const finish = (): void => {
    clearInterval(ticker);
    for (const s of sockets) s.destroy();
    report();
    process.exit(0);
  };
  setTimeout(finish, plan.holdMs).unref();
  let started = 0;
  const openNext = (): void => {
    // A few hundred at a time: the kernel's accept backlog is finite.
    const batch = Math.min(200, plan.count - started);
    for (let i = 0; i < batch; i++) open();
    started += batch;
    if (started < plan.count) setTimeout(openNext, 5);
  };
  const open = (): void => {
    const socket = connect({ port: plan.port, host: plan.host, localAddress: plan.localAddress });
    sockets.add(socket);
    let got = 0;
    socket.on('data', (d: Buffer) => {
      got += d.length;
      stats.received += d.length;
      if (plan.stall === true) socket.pause();
    });
    socket.on('error', () => stats.errors++);
    socket.on('close', () => {
      sockets.delete(socket);
      stats.closed++;
      // Refused at accept: an ERROR frame arrives, or a reset, right away.
      const talks = plan.mode === 'garbage' || plan.mode === 'waits' || plan.mode === 'subscribe';
      if (got > 0 && !talks) stats.refused++;
      if (stats.closed === plan.count) finish();
    });
    socket.once('connect', () => {
      stats.opened++;
      act(socket, plan, () => stats.written++);
    });
  };
  openNext();
}

function act(socket: Socket, plan: FloodPlan, onWritten: () => void): void {
  switch (plan.mode) {
    case 'idle':
      return;
    case 'trickle': {
      // The length prefix of a 1 MiB frame, then spaces: a byte at a time, a
      // frame that never ends (zeros alone would make a length-0 prefix,
      // which is refused as soon as its fourth byte arrives).
      const prefix = [0x00, 0x10, 0x00, 0x00];
      let sent = 0;
      const timer = setInterval(
        () => socket.write(Buffer.from([prefix[sent++] ?? 0x20])),
        plan.intervalMs ?? 200,
      );
      socket.once('close', () => clearInterval(timer));
      return;
    }
    case 'half-frame': {
      const header = Buffer.alloc(4);
      header.writeInt32BE(1_048_576);
      socket.write(Buffer.concat([header, Buffer.alloc(plan.bytes ?? 100, 0x20)]));
      return;
    }
    case 'garbage': {
      const body = randomBytes(plan.bytes ?? 1_024);
      if (plan.declaredLength !== undefined) body.writeInt32BE(plan.declaredLength, 0);
      socket.end(body);
      return;
    }
    case 'waits':
      socket.write(waitFrames(plan), () => onWritten());
      return;
    case 'subscribe': {
      const one = encodeMessage({ type: 'SUBSCRIBE_JOBS', filter: {} });
      const frames = Buffer.concat(Array<Buffer>(plan.subscriptions ?? 1).fill(one));
      socket.write(frames, () => onWritten());
      return;
    }
  }
}

/** `plan.waits` WAIT_JOB frames, the jobs in turn, in one buffer (built once per plan). */
let cachedWaits: Buffer | null = null;
function waitFrames(plan: FloodPlan): Buffer {
  if (cachedWaits !== null) return cachedWaits;
  const jobIds = plan.jobIds ?? ['no-such-job'];
  const frames: Buffer[] = [];
  for (let i = 0; i < (plan.waits ?? 1); i++) {
    const jobId = jobIds[i % jobIds.length] as string;
    frames.push(encodeMessage({ type: 'WAIT_JOB', jobId, timeoutMillis: plan.waitTimeoutMs ?? 0 }));
  }
  cachedWaits = Buffer.concat(frames);
  return cachedWaits;
}

const arg = process.argv[2];
if (arg !== undefined) run(JSON.parse(arg) as FloodPlan);
