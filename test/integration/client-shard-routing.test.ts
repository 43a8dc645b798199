/**
 * The client library's shard routing against stand-ins (no PostgreSQL): a
 * sharded coordinator's own client port (the "public" port, which answers
 * everything and gives the map) and one client port per shard. How the
 * client learns the map, and each fallback to the public port: an address it
 * cannot use, NOT_LEADER from a shard's port, a connection lost with a
 * request on it; and that nothing changes against a coordinator that is
 * not sharded, or with `shardRouting: false`.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { DtpClient, type ConnectOptions } from '../../src/client/client.js';
import { TransportError } from '../../src/client/errors.js';
import { FeatureCache } from '../../src/client/negotiation.js';
import { SHARD_PROBE_AFTER_REQUESTS } from '../../src/client/shard-routing.js';
import { FramedConnection } from '../../src/net/framed-connection.js';
import { TcpServer } from '../../src/net/tcp.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import type {
  ClientReply,
  ClientRequest,
  JobSnapshot,
  Message,
  ShardInfo,
} from '../../src/protocol/messages.js';
import { shardOfQueue, stampShard } from '../../src/protocol/shards.js';
import { queuesByShard } from '../helpers/sharded.js';
import { until } from '../helpers/until.js';

const HOST = '127.0.0.1';
const SHARDS = 4;
const QUEUES = queuesByShard(SHARDS);

/** What a stand-in does with a request: a reply, or a close of the connection. */
type Answer = ClientReply | 'drop' | 'end';

function snapshot(jobId: string, overrides: Partial<JobSnapshot> = {}): JobSnapshot {
  return {
    jobId,
    taskType: 'ECHO',
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

function jobIn(shard: number, n = 0): string {
  const id = `018f0000-0000-7000-8000-${n.toString(16).padStart(12, '0')}`;
  return stampShard(id, shard, SHARDS);
}

/** A coordinator's plausible answers (the map aside). */
function ordinary(msg: ClientRequest): ClientReply {
  if (msg.type === 'AUTH') return { type: 'AUTH_OK' };
  if (msg.type === 'SUBMIT_JOB') {
    const jobId = jobIn(shardOfQueue(msg.queue, SHARDS), Math.floor(Math.random() * 1e9));
    return { type: 'JOB_SUBMITTED', jobId, job: snapshot(jobId) };
  }
  if (msg.type === 'WAIT_JOB' && msg.jobId.startsWith('dtp-probe-')) {
    return { type: 'ERROR', code: 'UNKNOWN_JOB', message: `Unknown job: ${msg.jobId}` };
  }
  if (msg.type === 'WAIT_JOB') {
    return { type: 'JOB_STATUS', job: snapshot(msg.jobId, { state: 'COMPLETED' }) };
  }
  if (msg.type === 'GET_JOB_STATUS') return { type: 'JOB_STATUS', job: snapshot(msg.jobId) };
  if (msg.type === 'CANCEL_JOB') {
    return { type: 'JOB_CANCEL', cancelled: true, job: snapshot(msg.jobId) };
  }
  if (msg.type === 'LIST_JOBS') return { type: 'JOB_LIST', jobs: [], nextCursor: null };
  if (msg.type === 'LIST_QUEUES') return { type: 'QUEUE_LIST', queues: [] };
  return { type: 'ERROR', code: null, message: `Unsupported request: ${msg.type}` };
}

/** One client port stand-in: every request kept with its connection's number (from 1). */
class FakePort {
  readonly received: { msg: ClientRequest; connection: number }[] = [];
  accepted = 0;
  port = 0;
  /** Answers first; `ordinary` where it returns null. */
  handler: (msg: ClientRequest) => Answer | null = () => null;
  readonly #server: TcpServer;

  constructor() {
    this.#server = new TcpServer((socket) => {
      const connection = ++this.accepted;
      const framed: FramedConnection = new FramedConnection(socket, {
        onMessage: (raw: Message) => {
          const msg = raw as ClientRequest;
          this.received.push({ msg, connection });
          const answer = this.handler(msg) ?? ordinary(msg);
          if (answer === 'drop') void framed.destroy('the stand-in drops the connection');
          else if (answer === 'end') void framed.close('the stand-in closes');
          else framed.send(answer);
        },
        onProtocolError: () => void framed.destroy('bad frame'),
        onClose: () => undefined,
      });
    });
  }

  async start(): Promise<this> {
    this.port = await this.#server.listen(0, HOST);
    return this;
  }

  get address(): string {
    return `${HOST}:${this.port}`;
  }

  /** The types received, on one connection or all. */
  types(connection?: number): string[] {
    return this.received
      .filter((r) => connection === undefined || r.connection === connection)
      .map((r) => r.msg.type);
  }

  close(): Promise<void> {
    return this.#server.close();
  }
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function fakePort(): Promise<FakePort> {
  const port = await new FakePort().start();
  cleanups.push(() => port.close());
  return port;
}

/** A sharded coordinator stand-in: its public port, a port per shard, and the map it gives. */
async function sharded(): Promise<{ pub: FakePort; shards: FakePort[]; map: ShardInfo[] }> {
  const pub = await fakePort();
  const shards: FakePort[] = [];
  for (let i = 0; i < SHARDS; i++) shards.push(await fakePort());
  const map = shards.map((s, shard) => ({
    shard,
    leader: pub.address,
    epoch: 1,
    clientAddress: s.address,
    workerAddress: null,
  }));
  pub.handler = (msg) =>
    msg.type === 'LIST_SHARDS' ? { type: 'SHARD_LIST', shards: map, coordinators: [] } : null;
  return { pub, shards, map };
}

async function connect(
  pub: FakePort,
  options: Partial<ConnectOptions> = {},
): Promise<{ client: DtpClient; cache: FeatureCache }> {
  const cache = new FeatureCache();
  const client = await DtpClient.connect({
    host: HOST,
    port: pub.port,
    featureCache: cache,
    ...options,
  });
  cleanups.push(() => client.close());
  return { client, cache };
}

/** Reads a job of `shard` until one reaches `port` (its connection is dialled in the background). */
async function reach(client: DtpClient, shard: number, port: FakePort): Promise<void> {
  const reads = (): number => port.types().filter((t) => t === 'GET_JOB_STATUS').length;
  const before = reads();
  await until(
    async () => {
      await client.status(jobIn(shard));
      return reads() > before;
    },
    { what: `a read that reached shard ${shard} at ${port.address}` },
  );
}

/** The client learns the map (its first wait probes) and has a connection to every shard. */
async function routed(client: DtpClient, shards: FakePort[]): Promise<void> {
  await client.wait(jobIn(0), 1_000);
  for (const [shard, port] of shards.entries()) await reach(client, shard, port);
}

describe('shard routing of the client library', () => {
  it('learns the map on the probe connection and sends requests about one shard there', async () => {
    const { pub, shards } = await sharded();
    const { client, cache } = await connect(pub);
    await routed(client, shards);
    assert.deepEqual(pub.types(2), ['WAIT_JOB', 'LIST_SHARDS'], 'the probe asked for the shards');
    assert.equal(cache.shardsOf(client.address)?.sharded, true);
    const publicBefore = pub.received.length;
    for (const [shard, queue] of QUEUES.entries()) {
      const handle = await client.submit('ECHO', { shard }, { queue });
      assert.equal(handle.jobId.slice(-3), shard.toString(16).padStart(3, '0'));
      await client.cancel(handle.jobId);
      await client.wait(handle.jobId, 1_000);
      await client.listPage({ queue, limit: 5 });
      assert.deepEqual(shards[shard]?.types().slice(-4), [
        'SUBMIT_JOB',
        'CANCEL_JOB',
        'WAIT_JOB',
        'LIST_JOBS',
      ]);
    }
    // Only the queues probe (a connection of its own) reached the public port.
    assert.deepEqual(pub.types().slice(publicBefore), ['LIST_QUEUES']);
    // A list of every queue goes through the public port.
    await client.listPage({ limit: 5 });
    assert.deepEqual(pub.types().slice(-1), ['LIST_JOBS']);
    assert.equal(
      pub.received.filter((r) => r.connection === 1 && r.msg.type === 'LIST_SHARDS').length,
      0,
      'no LIST_SHARDS on the working connection',
    );
  });

  it('probes after enough requests when it never waits', async () => {
    const { pub, shards } = await sharded();
    const { client } = await connect(pub);
    for (let i = 0; i < SHARD_PROBE_AFTER_REQUESTS; i++) await client.status(jobIn(1, i));
    await until(() => pub.types().includes('LIST_SHARDS'), { what: 'the probe' });
    assert.deepEqual(pub.types(2), ['LIST_SHARDS'], 'on a connection of its own');
    await reach(client, 1, shards[1] as FakePort);
  });

  const oneShard: ClientReply = {
    type: 'SHARD_LIST',
    shards: [{ shard: 0, leader: 'x', epoch: 1, clientAddress: 'x', workerAddress: null }],
    coordinators: [],
  };
  const answers: [string, ClientReply | 'malformed'][] = [
    ['one shard (not sharded)', oneShard],
    ['a not-understood answer (before shards)', 'malformed'],
  ];
  for (const [name, answer] of answers) {
    it(`changes nothing against a coordinator that answers ${name}`, async () => {
      const pub = await fakePort();
      pub.handler = (msg) => {
        if (msg.type !== 'LIST_SHARDS') return null;
        if (answer !== 'malformed') return answer;
        return { type: 'ERROR', code: null, message: 'Malformed request: Undecodable message' };
      };
      const { client, cache } = await connect(pub);
      await client.wait(jobIn(0), 1_000);
      await until(() => cache.shardsOf(client.address)?.sharded === false, {
        what: 'found not sharded',
      });
      for (let i = 0; i < 2 * SHARD_PROBE_AFTER_REQUESTS; i++) await client.status(jobIn(1, i));
      assert.equal(pub.accepted, 2, 'the working connection and the probe');
      assert.deepEqual(pub.types(2), ['WAIT_JOB', 'LIST_SHARDS']);
      assert.ok(!pub.types(1).includes('LIST_SHARDS'));
    });
  }

  it('sends nothing to the shards with shardRouting false', async () => {
    const { pub, shards } = await sharded();
    const { client } = await connect(pub, { shardRouting: false });
    await client.wait(jobIn(0), 1_000);
    for (let i = 0; i < 2 * SHARD_PROBE_AFTER_REQUESTS; i++) {
      await client.submit('ECHO', {}, { queue: QUEUES[i % SHARDS] as string });
    }
    assert.ok(!pub.types().includes('LIST_SHARDS'));
    assert.ok(shards.every((s) => s.accepted === 0));
  });

  it('leaves an address it cannot reach to the public port, and does not retry it at once', async () => {
    const { pub, shards, map } = await sharded();
    const closed = await new FakePort().start();
    await closed.close();
    (map[2] as ShardInfo).clientAddress = closed.address;
    // Shard 3's port refuses the client's token: it is not used either, and dialled once.
    const refusing = shards[3] as FakePort;
    refusing.handler = (msg) =>
      msg.type === 'AUTH'
        ? { type: 'ERROR', code: ErrorCode.Unauthenticated, message: 'Unauthenticated' }
        : null;
    const { client } = await connect(pub, { token: 'secret' });
    await routed(client, shards.slice(0, 2));
    for (let i = 0; i < 10; i++) {
      await client.submit('ECHO', { i }, { queue: QUEUES[2 + (i % 2)] as string });
      await client.status(jobIn(2 + (i % 2), i));
    }
    assert.equal(pub.types().filter((t) => t === 'SUBMIT_JOB').length, 10);
    assert.equal(refusing.accepted, 1);
    assert.deepEqual(refusing.types(), ['AUTH']);
  });

  it('sends a request refused NOT_LEADER through the public port, then follows the new map', async () => {
    const { pub, shards, map } = await sharded();
    const { client } = await connect(pub);
    await routed(client, shards);
    const moved = await fakePort();
    (shards[1] as FakePort).handler = () => ({
      type: 'ERROR',
      code: ErrorCode.NotLeader,
      message: 'NOT_LEADER: this coordinator is a standby',
    });
    const handle = await client.submit('ECHO', {}, { queue: QUEUES[1] as string });
    assert.equal(handle.jobId.slice(-3), '001');
    assert.deepEqual(pub.types(1).slice(-2), ['SUBMIT_JOB', 'LIST_SHARDS'], 'resent, map read');
    // The map read again still names the port that refused: the public port serves the shard.
    await client.status(jobIn(1));
    assert.deepEqual((shards[1] as FakePort).types().slice(-1), ['SUBMIT_JOB']);
    assert.deepEqual(pub.types(1).slice(-1), ['GET_JOB_STATUS']);
    // The shard's new leader (a new epoch) is followed once a map names it.
    map[1] = { ...(map[1] as ShardInfo), clientAddress: moved.address, epoch: 2 };
    await client.shards();
    await reach(client, 1, moved);
  });

  it('resends through the public port only what is safe to repeat after a lost connection', async () => {
    const { pub, shards } = await sharded();
    const { client } = await connect(pub);
    await routed(client, shards);
    const lossy = shards[2] as FakePort;
    lossy.handler = (msg) =>
      msg.type === 'SUBMIT_JOB' || msg.type === 'CANCEL_JOB' ? 'drop' : null;
    const queue = QUEUES[2] as string;
    await assert.rejects(
      client.submit('ECHO', {}, { queue }),
      (err: unknown) => err instanceof TransportError && err.code === 'CONNECTION_LOST',
    );
    assert.ok(!pub.types().includes('SUBMIT_JOB'), 'a submission without a key is not resent');
    await until(() => pub.types(1).includes('LIST_SHARDS'), { what: 'the map read again' });
    await reach(client, 2, lossy);
    const keyed = await client.submit('ECHO', {}, { queue, idempotencyKey: 'k1' });
    assert.equal(keyed.jobId.slice(-3), '002');
    const resent = pub.received.filter((r) => r.msg.type === 'SUBMIT_JOB');
    assert.equal(resent.length, 1);
    assert.equal(resent[0]?.msg.type === 'SUBMIT_JOB' && resent[0].msg.idempotencyKey, 'k1');
    await reach(client, 2, lossy);
    assert.equal((await client.cancel(jobIn(2))).cancelled, true);
    assert.ok(pub.types().includes('CANCEL_JOB'), 'a cancel is resent');
  });

  it('reads the map again every few seconds while it routes', { timeout: 20_000 }, async () => {
    const { pub, shards, map } = await sharded();
    const { client } = await connect(pub);
    await routed(client, shards);
    const moved = await fakePort();
    map[0] = { ...(map[0] as ShardInfo), clientAddress: moved.address, epoch: 2 };
    const readsBefore = pub.types(1).filter((t) => t === 'LIST_SHARDS').length;
    await until(
      async () => {
        await client.status(jobIn(0));
        return moved.types().includes('GET_JOB_STATUS');
      },
      { what: 'a read at the address of the map read again', timeoutMs: 15_000, intervalMs: 50 },
    );
    const reads = pub.types(1).filter((t) => t === 'LIST_SHARDS').length - readsBefore;
    assert.ok(reads >= 1 && reads <= 2, `${reads} reads of the map`);
  });
});
