/**
 * The client's feature probes under a burst: requests that need a probed
 * feature (here: a named queue) and are made while the probe is out wait
 * for that one probe, so a burst costs one probe connection, and the
 * requests leave, and their jobs are created, in the order they were made.
 */
import assert from 'node:assert/strict';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/index.js';
import { startCoordinator, type TestCoordinator } from '../helpers/test-coordinator.js';

/** A TCP relay to `port` on 127.0.0.1 that counts the connections it was handed. */
async function countingRelay(
  port: number,
): Promise<{ server: Server; port: number; count: () => number }> {
  let count = 0;
  const sockets = new Set<Socket>();
  const server = createServer((inbound) => {
    count++;
    const outbound = connect(port, '127.0.0.1');
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => sockets.delete(s));
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  server.on('close', () => {
    for (const s of sockets) s.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('relay has no port');
  return { server, port: address.port, count: () => count };
}

describe('client feature probes under a burst', () => {
  const closers: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  it('makes one probe for a burst of requests that need it, which leave in order', async () => {
    const tc: TestCoordinator = await startCoordinator();
    closers.push(() => tc.close());
    // A fresh address (the relay's port): nothing is known of it yet.
    const relay = await countingRelay(tc.coordinator.clientPort);
    closers.push(
      () =>
        new Promise<void>((resolve) => {
          relay.server.close(() => resolve());
          relay.server.emit('close');
        }),
    );
    const client = await DtpClient.connect({ host: '127.0.0.1', port: relay.port });
    closers.push(() => client.close());
    const before = relay.count();
    const handles = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        client.submit('SLEEP', { durationMillis: 1 }, { queue: 'burst', idempotencyKey: `b${i}` }),
      ),
    );
    assert.ok(
      relay.count() - before <= 2,
      `8 requests that need the queues probe opened ${relay.count() - before} connections`,
    );
    const ids = handles.map((h) => h.jobId);
    assert.deepEqual(
      [...ids].sort(),
      ids,
      'the jobs were created in the order the calls were made',
    );
  });
});
