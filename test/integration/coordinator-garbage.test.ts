import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import { encodeFrame } from '../../src/protocol/framing.js';
import { RawClient, ScriptedWorker } from '../helpers/raw-peers.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';
import { orTimeout } from '../helpers/until.js';

function lengthPrefix(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
}

/** Writes raw bytes, then collects everything until the peer closes. */
async function sendRaw(
  port: number,
  bytes: Buffer,
): Promise<{ received: Buffer; closed: boolean }> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.write(bytes);
  const closed = await orTimeout(
    new Promise<boolean>((resolve) => socket.once('close', () => resolve(true))),
    3_000,
    false,
  );
  socket.destroy();
  return { received: Buffer.concat(chunks), closed };
}

function firstMessage(bytes: Buffer): { type: string; message?: string } | null {
  if (bytes.length < 4) return null;
  const n = bytes.readInt32BE(0);
  return JSON.parse(bytes.subarray(4, 4 + n).toString('utf8')) as {
    type: string;
    message?: string;
  };
}

describe('coordinator under garbage and misbehaving peers', () => {
  let tc: TestCoordinator;
  let c: RawClient;
  let w: ScriptedWorker;

  before(async () => {
    // A generous heartbeat timeout: these tests load the event loop that the
    // test's own scripted worker shares with the coordinator.
    tc = await startCoordinator({ heartbeatTimeoutMs: 3_000 });
    c = await RawClient.connect(tc.coordinator.clientPort);
    w = await ScriptedWorker.register(tc.coordinator.workerPort, 'steady', 1);
  });
  after(async () => {
    await Promise.all([c.close(), w.close()]);
    await tc.close();
  });

  async function stillWorks(): Promise<void> {
    const jobId = await c.submit('SHA256', { text: 'alive' });
    w.succeed(await w.assignments.next(), 'ok');
    assert.equal((await c.wait(jobId)).state, 'COMPLETED');
  }

  it('answers malformed client frames with an ERROR and closes only that connection', async () => {
    const cases: [string, Buffer, boolean][] = [
      ['non-JSON', encodeFrame(Buffer.from('not json')), true],
      ['unknown type', encodeFrame(Buffer.from('{"type":"NOPE"}')), true],
      ['array', encodeFrame(Buffer.from('[1,2]')), true],
      ['wrong field type', encodeFrame(Buffer.from('{"type":"GET_JOB_STATUS","jobId":42}')), true],
      ['garbage bytes', Buffer.from([0x93, 0x01, 0x02, 0x03]), false],
      ['length 0x7fffffff', lengthPrefix(0x7fffffff), false],
      ['length 0', lengthPrefix(0), false],
      ['length 1 MiB + 1', Buffer.concat([lengthPrefix(1_048_577), Buffer.from('{}')]), false],
    ];
    for (const [what, bytes, wantsError] of cases) {
      const { received, closed } = await sendRaw(tc.coordinator.clientPort, bytes);
      assert.ok(closed, `${what}: connection not closed`);
      const msg = firstMessage(received);
      if (wantsError) assert.match(msg?.message ?? '', /Malformed request/, what);
      else assert.ok(msg === null || msg.type === 'ERROR', what);
    }
    await stillWorks();
  });

  it('answers a worker message on the client port with Unsupported request and stays open', async () => {
    const reply = await c.request({ type: 'HEARTBEAT', workerId: 'x' } as never);
    assert.ok(reply.type === 'ERROR' && reply.message.includes('Unsupported request'));
    await stillWorks();
  });

  it('closes worker-port connections that send garbage or a wrong first message', async () => {
    for (const bytes of [
      Buffer.from([0x93, 0x01, 0x02, 0x03]),
      lengthPrefix(0x7fffffff),
      encodeFrame(Buffer.from('{"type":"TOTALLY_UNKNOWN"}')),
      encodeFrame(Buffer.from('[]')),
    ]) {
      const { closed } = await sendRaw(tc.coordinator.workerPort, bytes);
      assert.ok(closed);
    }
    const first = JSON.stringify({ type: 'HEARTBEAT', workerId: 'x' });
    const { received, closed } = await sendRaw(
      tc.coordinator.workerPort,
      encodeFrame(Buffer.from(first)),
    );
    assert.ok(closed);
    assert.match(firstMessage(received)?.message ?? '', /WORKER_REGISTER/);
    const ids = await c.request({ type: 'LIST_WORKERS' });
    assert.ok(ids.type === 'WORKER_LIST' && ids.workers.map((x) => x.workerId).join() === 'steady');
    await stillWorks();
  });

  it('loses a registered worker that sends an illegal message and retries its job', async () => {
    const bad = await ScriptedWorker.register(tc.coordinator.workerPort, 'bad', 2);
    const jobId = await c.submit('SLEEP', { durationMillis: 1 });
    const served = await bad.assignments.next(); // 2 free slots beat 1
    assert.equal(served.jobId, jobId);
    bad.send({ type: 'LIST_JOBS', limit: null, state: null, cursor: null });
    await bad.closed;
    const retry = await w.assignments.next();
    assert.deepEqual([retry.jobId, retry.attemptNumber], [jobId, 2]);
    w.succeed(retry, 'recovered');
    const job = await c.wait(jobId);
    assert.match(job.error ?? '', /worker bad lost \(protocol violation/);
  });

  it('survives a thousand idle connections and closes unregistered idle worker sockets', async () => {
    const sockets: Socket[] = [];
    for (let i = 0; i < 1000; i++) {
      const port = i % 2 === 0 ? tc.coordinator.clientPort : tc.coordinator.workerPort;
      const s = connect(port, '127.0.0.1');
      s.on('error', () => undefined);
      s.resume();
      sockets.push(s);
    }
    await Promise.all(sockets.map((s) => once(s, 'connect')));
    await stillWorks();
    // Worker-port sockets that never register are closed after the registration timeout.
    const workerSide = sockets.filter((_, i) => i % 2 === 1);
    await Promise.all(workerSide.map((s) => once(s, 'close')));
    for (const s of sockets) s.destroy();
  });
});
