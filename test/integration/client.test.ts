import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { DtpClient } from '../../src/client/client.js';
import {
  ClientClosedError,
  RemoteError,
  SubmitRejectedError,
  TransportError,
  UnexpectedReplyError,
  WaitTimeoutError,
} from '../../src/client/errors.js';
import {
  EXTENDED_FEATURES,
  FeatureCache,
  V1_FEATURES,
  type CoordinatorFeatures,
} from '../../src/client/negotiation.js';
import { FramedConnection } from '../../src/net/framed-connection.js';
import { TcpServer } from '../../src/net/tcp.js';
import type { ClientReply, JobSnapshot, Message } from '../../src/protocol/messages.js';
import { until } from '../helpers/until.js';

/** What the fake coordinator does with one request. */
type Handler = (msg: Message, conn: FakeConnection) => void;

interface FakeConnection {
  /** 1-based order of acceptance. */
  readonly index: number;
  reply(msg: ClientReply): void;
  /** Flushes what was sent, then closes (as the reference does after an undecodable frame). */
  end(): void;
  destroy(): void;
}

/** A coordinator stand-in on 127.0.0.1: records requests, answers through a handler. */
class FakeServer {
  readonly received: { msg: Message; connection: number }[] = [];
  port = 0;
  #accepted = 0;
  readonly #server: TcpServer;

  private constructor(handler: Handler) {
    this.#server = new TcpServer((socket) => {
      const index = ++this.#accepted;
      const framed: FramedConnection = new FramedConnection(socket, {
        onMessage: (msg) => {
          this.received.push({ msg, connection: index });
          handler(msg, fake);
        },
        onProtocolError: () => void framed.destroy(),
        onClose: () => undefined,
      });
      const fake: FakeConnection = {
        index,
        reply: (msg) => void framed.send(msg),
        end: () => void framed.close('fake server closes'),
        destroy: () => void framed.destroy('fake server drops the connection'),
      };
    });
  }

  static async start(handler: Handler): Promise<FakeServer> {
    const server = new FakeServer(handler);
    server.port = await server.#server.listen(0, '127.0.0.1');
    return server;
  }

  get accepted(): number {
    return this.#accepted;
  }

  types(): string[] {
    return this.received.map((r) => r.msg.type);
  }

  close(): Promise<void> {
    return this.#server.close();
  }
}

function snapshot(jobId: string, overrides: Partial<JobSnapshot> = {}): JobSnapshot {
  return {
    jobId,
    taskType: 'SHA256',
    state: 'QUEUED',
    attempts: 0,
    maxAttempts: 3,
    workerId: null,
    result: null,
    error: null,
    createdAtMillis: 1_000,
    updatedAtMillis: 1_000,
    priority: 'NORMAL',
    ...overrides,
  };
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/**
 * A fake server and a client of it. The client's feature cache already knows
 * the answer `features` (default: WAIT_JOB understood), or nothing when null.
 */
async function setUp(
  handler: Handler,
  features: CoordinatorFeatures | null = EXTENDED_FEATURES,
): Promise<{ server: FakeServer; client: DtpClient; cache: FeatureCache }> {
  const server = await FakeServer.start(handler);
  cleanups.push(() => server.close());
  const cache = new FeatureCache();
  const address = `127.0.0.1:${server.port}`;
  if (features !== null) cache.record(address, features);
  const client = await DtpClient.connect({
    host: '127.0.0.1',
    port: server.port,
    featureCache: cache,
  });
  cleanups.push(() => client.close());
  return { server, client, cache };
}

describe('DtpClient', () => {
  it('matches pipelined replies to requests in order', { timeout: 10_000 }, async () => {
    const held: { jobId: string; conn: FakeConnection }[] = [];
    const { client, server } = await setUp((msg, conn) => {
      if (msg.type !== 'GET_JOB_STATUS') return;
      held.push({ jobId: msg.jobId, conn });
      // Answer only once all three are in: a client that waited for each
      // reply before sending the next request would hang here.
      if (held.length === 3) {
        for (const h of held) h.conn.reply({ type: 'JOB_STATUS', job: snapshot(h.jobId) });
      }
    });
    const jobs = await Promise.all(['a', 'b', 'c'].map((id) => client.status(id)));
    assert.deepEqual(
      jobs.map((j) => j.jobId),
      ['a', 'b', 'c'],
    );
    assert.equal(server.accepted, 1);
  });

  it('turns ERROR replies into typed RemoteErrors', async () => {
    const { client } = await setUp((msg, conn) => {
      if (msg.type === 'GET_JOB_STATUS') {
        conn.reply({ type: 'ERROR', message: `Unknown job: ${msg.jobId}`, code: null });
      } else if (msg.type === 'CANCEL_JOB') {
        conn.reply({ type: 'ERROR', message: 'nope', code: 'SOMETHING_SPECIFIC' });
      } else {
        conn.reply({ type: 'WORKER_LIST', workers: [] });
      }
    });
    await assert.rejects(client.status('missing'), (err: unknown) => {
      assert.ok(err instanceof RemoteError);
      assert.equal(err.code, 'UNKNOWN_JOB');
      assert.equal(err.message, 'Unknown job: missing');
      return true;
    });
    await assert.rejects(
      client.cancel('x'),
      (err: unknown) => err instanceof RemoteError && err.code === 'SOMETHING_SPECIFIC',
    );
    await assert.rejects(client.listPage(), UnexpectedReplyError);
    assert.deepEqual(await client.workers(), []);
  });

  it('rejects every pending request when the connection is lost, then redials', async () => {
    let seen = 0;
    const { client, server } = await setUp((msg, conn) => {
      seen++;
      if (conn.index === 1 && seen === 2) conn.destroy();
      if (conn.index > 1) conn.reply({ type: 'WORKER_LIST', workers: [] });
    });
    const results = await Promise.allSettled([client.status('a'), client.status('b')]);
    for (const result of results) {
      assert.equal(result.status, 'rejected');
      assert.ok(result.reason instanceof TransportError);
      assert.equal(result.reason.code, 'CONNECTION_LOST');
    }
    assert.deepEqual(await client.workers(), []);
    assert.equal(server.accepted, 2);
  });

  it('fails to connect with CONNECT_FAILED', async () => {
    const server = await FakeServer.start(() => undefined);
    const port = server.port;
    await server.close();
    await assert.rejects(
      DtpClient.connect({ host: '127.0.0.1', port }),
      (err: unknown) => err instanceof TransportError && err.code === 'CONNECT_FAILED',
    );
  });

  it('submits and uses the job snapshot of JOB_SUBMITTED', async () => {
    const { client, server } = await setUp((msg, conn) => {
      if (msg.type === 'SUBMIT_JOB') {
        assert.equal(msg.taskType, 'SHA256');
        assert.deepEqual(msg.payload, { text: 'abc' });
        assert.equal(msg.priority, 'HIGH');
        conn.reply({
          type: 'JOB_SUBMITTED',
          jobId: 'j1',
          job: snapshot('j1', { priority: 'HIGH' }),
        });
      }
    });
    const result = await client.submit({
      taskType: 'SHA256',
      payload: { text: 'abc' },
      priority: 'HIGH',
    });
    assert.equal(result.jobId, 'j1');
    assert.equal(result.snapshot.priority, 'HIGH');
    assert.deepEqual(server.types(), ['SUBMIT_JOB']);
  });

  it('asks for the status when JOB_SUBMITTED has no snapshot', async () => {
    const { client, server } = await setUp((msg, conn) => {
      if (msg.type === 'SUBMIT_JOB') conn.reply({ type: 'JOB_SUBMITTED', jobId: 'j2', job: null });
      if (msg.type === 'GET_JOB_STATUS')
        conn.reply({ type: 'JOB_STATUS', job: snapshot(msg.jobId) });
    });
    const result = await client.submit({ taskType: 'SHA256', payload: { text: 'abc' } });
    assert.equal(result.snapshot.jobId, 'j2');
    assert.deepEqual(server.types(), ['SUBMIT_JOB', 'GET_JOB_STATUS']);
  });

  it('turns SUBMIT_REJECTED into a SubmitRejectedError', async () => {
    const { client } = await setUp((_msg, conn) => {
      conn.reply({
        type: 'SUBMIT_REJECTED',
        reason: 'too many active jobs',
        activeCount: 5,
        limit: 5,
        retryable: true,
      });
    });
    await assert.rejects(
      client.submit({ taskType: 'SHA256', payload: { text: 'x' } }),
      (err: unknown) => {
        assert.ok(err instanceof SubmitRejectedError);
        assert.equal(err.code, 'SUBMIT_REJECTED');
        assert.deepEqual(
          [err.reason, err.activeCount, err.limit, err.retryable],
          ['too many active jobs', 5, 5, true],
        );
        return true;
      },
    );
  });

  it('retries a rejected submission until it is accepted', async () => {
    let submits = 0;
    const { client } = await setUp((_msg, conn) => {
      submits++;
      if (submits < 3) {
        conn.reply({
          type: 'SUBMIT_REJECTED',
          reason: 'full',
          activeCount: 1,
          limit: 1,
          retryable: true,
        });
      } else {
        conn.reply({ type: 'JOB_SUBMITTED', jobId: 'j3', job: snapshot('j3') });
      }
    });
    const delays: number[] = [];
    const result = await client.submit(
      { taskType: 'SHA256', payload: { text: 'x' } },
      {
        retries: 5,
        sleep: (ms) => {
          delays.push(ms);
          return Promise.resolve();
        },
        random: () => 0,
      },
    );
    assert.equal(result.jobId, 'j3');
    assert.deepEqual(delays, [0, 0]);
  });

  it('resends over a fresh connection after a transport failure with an idempotency key', async () => {
    const { client, server } = await setUp((msg, conn) => {
      if (conn.index === 1) conn.destroy();
      else if (msg.type === 'SUBMIT_JOB')
        conn.reply({ type: 'JOB_SUBMITTED', jobId: 'j4', job: snapshot('j4') });
    });
    const result = await client.submit(
      { taskType: 'SHA256', payload: { text: 'x' }, idempotencyKey: 'key-1' },
      { retries: 2, sleep: () => Promise.resolve() },
    );
    assert.equal(result.jobId, 'j4');
    assert.equal(server.accepted, 2);
    const keys = server.received.map((r) =>
      r.msg.type === 'SUBMIT_JOB' ? r.msg.idempotencyKey : null,
    );
    assert.deepEqual(keys, ['key-1', 'key-1']);
  });

  it('waits with one WAIT_JOB that the server holds', async () => {
    const { client, server } = await setUp((msg, conn) => {
      if (msg.type !== 'WAIT_JOB') return;
      assert.ok(
        msg.timeoutMillis !== null && msg.timeoutMillis <= 5_000 && msg.timeoutMillis > 4_000,
      );
      setTimeout(
        () =>
          conn.reply({
            type: 'JOB_STATUS',
            job: snapshot(msg.jobId, { state: 'COMPLETED', result: 'r' }),
          }),
        20,
      );
    });
    const job = await client.wait('j5', 5_000);
    assert.equal(job.state, 'COMPLETED');
    assert.deepEqual(server.types(), ['WAIT_JOB']);
  });

  it('fails a wait with WaitTimeoutError carrying the last snapshot', async () => {
    const { client, server } = await setUp((msg, conn) => {
      if (msg.type !== 'WAIT_JOB') return;
      // Hold for the requested time, then answer with the current state.
      setTimeout(
        () =>
          conn.reply({
            type: 'JOB_STATUS',
            job: snapshot(msg.jobId, { state: 'RUNNING', workerId: 'w1' }),
          }),
        msg.timeoutMillis ?? 0,
      );
    });
    await assert.rejects(client.wait('j6', 50), (err: unknown) => {
      assert.ok(err instanceof WaitTimeoutError);
      assert.equal(err.code, 'WAIT_TIMEOUT');
      assert.equal(err.job.state, 'RUNNING');
      return true;
    });
    assert.ok(server.types().every((t) => t === 'WAIT_JOB'));
  });

  it('passes list options and returns the cursor', async () => {
    const { client, server } = await setUp((_msg, conn) => {
      conn.reply({ type: 'JOB_LIST', jobs: [snapshot('new'), snapshot('old')], nextCursor: 'c2' });
    });
    const page = await client.listPage({ limit: 2, state: 'QUEUED', cursor: 'c1' });
    assert.deepEqual(
      page.jobs.map((j) => j.jobId),
      ['new', 'old'],
    );
    assert.equal(page.nextCursor, 'c2');
    assert.deepEqual(server.received[0]?.msg, {
      type: 'LIST_JOBS',
      limit: 2,
      state: 'QUEUED',
      cursor: 'c1',
      knownStates: ['SCHEDULED', 'WAITING'],
    });
  });

  it('closes idempotently, failing pending and later requests', async () => {
    const { client, server } = await setUp(() => undefined);
    const pending = assert.rejects(client.status('never-answered'), ClientClosedError);
    await until(() => server.received.length === 1, { what: 'the request to arrive' });
    const first = client.close();
    assert.equal(client.close(), first);
    await first;
    await pending;
    await assert.rejects(client.workers(), ClientClosedError);
  });

  it('probes WAIT_JOB on a connection of its own and remembers the answer', async () => {
    const { client, server, cache } = await setUp((msg, conn) => {
      if (msg.type === 'WAIT_JOB' && msg.jobId.startsWith('dtp-probe-')) {
        assert.equal(msg.timeoutMillis, 0);
        conn.reply({ type: 'ERROR', message: `Unknown job: ${msg.jobId}`, code: 'UNKNOWN_JOB' });
      } else if (msg.type === 'WAIT_JOB') {
        conn.reply({ type: 'JOB_STATUS', job: snapshot(msg.jobId, { state: 'COMPLETED' }) });
      }
    }, null);
    const job = await client.wait('j1', 1_000);
    assert.equal(job.state, 'COMPLETED');
    await client.wait('j2', 1_000);
    const probes = server.received.filter((r) => r.msg.type === 'WAIT_JOB' && r.connection === 2);
    assert.equal(probes.length, 1, 'one probe, on a second connection');
    assert.equal(server.accepted, 2);
    assert.deepEqual(cache.get(client.address), EXTENDED_FEATURES);
    assert.deepEqual(await client.features(), EXTENDED_FEATURES);
  });

  for (const [name, answer] of [
    ['a close without reply', null],
    [
      'Malformed request (the reference)',
      "Malformed request: Undecodable message: Could not resolve type id 'WAIT_JOB'",
    ],
    ['Unsupported request', 'Unsupported request: WAIT_JOB'],
  ] as const) {
    it(`falls back to polling after ${name}`, async () => {
      let polls = 0;
      const { client, server, cache } = await setUp((msg, conn) => {
        if (msg.type === 'WAIT_JOB') {
          if (answer !== null) conn.reply({ type: 'ERROR', message: answer, code: null });
          conn.end();
        } else if (msg.type === 'GET_JOB_STATUS') {
          polls++;
          const state = polls < 3 ? 'RUNNING' : 'COMPLETED';
          conn.reply({ type: 'JOB_STATUS', job: snapshot(msg.jobId, { state }) });
        }
      }, null);
      const job = await client.wait('j1', 5_000);
      assert.equal(job.state, 'COMPLETED');
      assert.equal(polls, 3);
      assert.deepEqual(cache.get(client.address), V1_FEATURES);
      const onMain = server.received.filter((r) => r.connection === 1).map((r) => r.msg.type);
      assert.deepEqual(onMain, ['GET_JOB_STATUS', 'GET_JOB_STATUS', 'GET_JOB_STATUS']);
    });
  }

  for (const [message, code] of [
    ['Unknown job: dtp-probe', 'UNKNOWN_JOB'],
    ['NOT_LEADER: this coordinator is a standby', 'NOT_LEADER'],
    ['Unauthenticated', 'UNAUTHENTICATED'],
    ['Store failed: the coordinator stopped accepting work', 'STORE_FAILED'],
  ] as const) {
    it(`does not downgrade on an ordinary error (${code})`, async () => {
      const { client, cache } = await setUp((msg, conn) => {
        if (msg.type === 'WAIT_JOB') conn.reply({ type: 'ERROR', message, code });
      }, null);
      assert.deepEqual(await client.features(), EXTENDED_FEATURES);
      assert.deepEqual(cache.get(client.address), EXTENDED_FEATURES);
    });
  }

  it('downgrades when WAIT_JOB on the working connection is not understood', async () => {
    const { client, cache } = await setUp((msg, conn) => {
      if (msg.type === 'WAIT_JOB') {
        conn.reply({
          type: 'ERROR',
          message: 'Malformed request: Undecodable message',
          code: null,
        });
        conn.end();
      } else if (msg.type === 'GET_JOB_STATUS') {
        conn.reply({ type: 'JOB_STATUS', job: snapshot(msg.jobId, { state: 'FAILED' }) });
      }
    });
    assert.equal((await client.wait('j1', 5_000)).state, 'FAILED');
    assert.deepEqual(cache.get(client.address), V1_FEATURES);
  });

  it('pages a reply that ignored limit and state itself', async () => {
    const all = ['j5', 'j4', 'j3', 'j2', 'j1'].map((id, i) =>
      snapshot(id, { state: i % 2 === 0 ? 'QUEUED' : 'COMPLETED', createdAtMillis: 10 - i }),
    );
    const { client, server, cache } = await setUp((msg, conn) => {
      if (msg.type === 'LIST_JOBS') conn.reply({ type: 'JOB_LIST', jobs: all, nextCursor: null });
    }, null);
    const first = await client.listPage({ limit: 2 });
    assert.deepEqual(
      first.jobs.map((j) => j.jobId),
      ['j5', 'j4'],
    );
    assert.ok(first.nextCursor?.startsWith('dtp-local:'));
    assert.deepEqual(cache.get(client.address), V1_FEATURES);
    const second = await client.listPage({ limit: 2, cursor: first.nextCursor ?? '' });
    assert.deepEqual(
      second.jobs.map((j) => j.jobId),
      ['j3', 'j2'],
    );
    const sent = server.received.at(-1)?.msg;
    assert.equal(sent?.type === 'LIST_JOBS' ? sent.cursor : 'x', null, 'own cursors stay here');
    const queued: string[] = [];
    for await (const job of client.list({ state: 'QUEUED', limit: 1 })) queued.push(job.jobId);
    assert.deepEqual(queued, ['j5', 'j3', 'j1']);
  });

  it('follows nextCursor through every page', async () => {
    const pages: Record<string, { jobs: JobSnapshot[]; nextCursor: string | null }> = {
      start: { jobs: [snapshot('c'), snapshot('b')], nextCursor: 'p2' },
      p2: { jobs: [snapshot('a')], nextCursor: null },
    };
    const { client } = await setUp((msg, conn) => {
      if (msg.type !== 'LIST_JOBS') return;
      const page = pages[msg.cursor ?? 'start'];
      if (page !== undefined) conn.reply({ type: 'JOB_LIST', ...page });
    });
    const ids: string[] = [];
    for await (const job of client.list({ limit: 2 })) ids.push(job.jobId);
    assert.deepEqual(ids, ['c', 'b', 'a']);
  });
});
