/**
 * Tokens with several coordinators on one PostgreSQL database: a standby
 * answers AUTH (and a registration without a token) with NOT_LEADER before
 * any token check, and the client library and the worker, given every
 * address and a token, follow it to the leader and authenticate there.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, afterEach, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/client.js';
import type { Worker } from '../../src/worker/worker.js';
import { createTestDatabase, dropTestDatabase, postgresSkip } from '../helpers/postgres.js';
import { rawConnection } from '../helpers/raw-peers.js';
import {
  startCoordinator,
  startTaskWorker,
  tempDir,
  type TestCoordinator,
} from '../helpers/test-coordinator.js';
import { until } from '../helpers/until.js';

const skip = postgresSkip();
const CLIENT_TOKEN = 'ha-client-token-0123456789abcdef';
const WORKER_TOKEN = 'ha-worker-token-fedcba9876543210';
const databases: string[] = [];
const cleanups: (() => Promise<unknown> | void)[] = [];
after(async () => {
  for (const url of databases) await dropTestDatabase(url);
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('tokens with several coordinators', { skip }, () => {
  it('says NOT_LEADER before any token check, and peers follow it to the leader', async () => {
    const url = await createTestDatabase();
    databases.push(url);
    const { dir, remove } = tempDir();
    cleanups.push(remove);
    writeFileSync(join(dir, 'clients'), `${CLIENT_TOKEN}\n`);
    writeFileSync(join(dir, 'workers'), `${WORKER_TOKEN}\n`);
    const security = {
      clientTokenFile: join(dir, 'clients'),
      workerTokenFile: join(dir, 'workers'),
    };
    const nodes: TestCoordinator[] = [];
    for (let k = 0; k < 2; k++) {
      const tc = await startCoordinator({
        databasePath: url,
        leaseTtlMs: 1_000,
        leaseRenewIntervalMs: 100,
        security,
      });
      cleanups.push(() => tc.close());
      nodes.push(tc);
      if (k === 0) {
        await until(() => tc.coordinator.status().role === 'leader', { what: 'a leader' });
      }
    }
    const [leader, standby] = nodes.map((n) => n.coordinator) as [
      TestCoordinator['coordinator'],
      TestCoordinator['coordinator'],
    ];
    await until(() => standby.status().leaderClient !== null, { what: 'the standby to know' });

    // A wrong token on the standby still gets NOT_LEADER, not UNAUTHENTICATED.
    const raw = await rawConnection(standby.clientPort);
    cleanups.push(() => raw.conn.destroy());
    raw.conn.send({ type: 'AUTH', token: 'wrong' });
    const reply = await raw.inbox.next();
    assert.equal(reply.type === 'ERROR' ? reply.code : reply.type, 'NOT_LEADER');

    // Standby first in the list: the client follows to the leader and authenticates there.
    const hosts = `127.0.0.1:${standby.clientPort},127.0.0.1:${leader.clientPort}`;
    const client = await DtpClient.connect({ host: hosts, port: 1, token: CLIENT_TOKEN });
    cleanups.push(() => client.close());
    const workerHosts = `127.0.0.1:${standby.workerPort},127.0.0.1:${leader.workerPort}`;
    const w: Worker = await startTaskWorker(1, 'ha-w', {
      coordinatorHost: workerHosts,
      authToken: WORKER_TOKEN,
    });
    cleanups.push(() => w.close());
    await once(w.events, 'registered');
    const { jobId } = await client.submit({ taskType: 'SHA256', payload: { text: 'abc' } });
    assert.equal((await client.wait(jobId, 10_000)).state, 'COMPLETED');
    await assert.rejects(DtpClient.connect({ host: hosts, port: 1, token: 'wrong-token' }), {
      code: 'UNAUTHENTICATED',
    });
  });
});
