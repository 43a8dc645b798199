/**
 * A sharded coordinator's public worker port, as a worker sees it, for
 * testing the worker's side: every WORKER_REGISTER is answered ERROR
 * NOT_LEADER with the shard map (`shards`) and the connection is closed;
 * every LIST_SHARDS is answered SHARD_LIST, and the connection stays open
 * for more. The test sets the map (pointing the shards' `workerAddress` at
 * real coordinators standing in for the shards) and changes it at will.
 */
import { FramedConnection } from '../../src/net/framed-connection.js';
import { TcpServer } from '../../src/net/tcp.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import type { ShardInfo } from '../../src/protocol/messages.js';
import { HOST } from './fake-coordinator.js';

/** The map where each shard `n` is led from `workerAddresses[n]` (null: no leader). */
export function shardMap(workerAddresses: readonly (string | null)[]): ShardInfo[] {
  return workerAddresses.map((workerAddress, shard) => ({
    shard,
    leader: workerAddress,
    epoch: workerAddress === null ? 0 : 1,
    clientAddress: null,
    workerAddress,
  }));
}

export class FakeShardPort {
  readonly server: TcpServer;
  port = 0;
  /** The map it gives. */
  shards: ShardInfo[];
  /** WORKER_REGISTERs refused so far. */
  registrations = 0;
  /** LIST_SHARDS answered so far. */
  listRequests = 0;
  readonly #connections = new Set<FramedConnection>();

  private constructor(shards: ShardInfo[]) {
    this.shards = shards;
    this.server = new TcpServer((socket) => {
      const connection: FramedConnection = new FramedConnection(socket, {
        onMessage: (msg) => {
          if (msg.type === 'WORKER_REGISTER') {
            this.registrations++;
            connection.send({
              type: 'ERROR',
              code: ErrorCode.NotLeader,
              message: 'SHARDED: register with the shards of this database',
              shards: this.shards,
            });
            void connection.close('sharded');
          } else if (msg.type === 'LIST_SHARDS') {
            this.listRequests++;
            connection.send({ type: 'SHARD_LIST', shards: this.shards, coordinators: [] });
          } else {
            void connection.destroy(`unexpected ${msg.type}`);
          }
        },
        onProtocolError: () => void connection.destroy('bad frame'),
        onClose: () => this.#connections.delete(connection),
      });
      this.#connections.add(connection);
    });
  }

  static async listen(shards: ShardInfo[]): Promise<FakeShardPort> {
    const fake = new FakeShardPort(shards);
    fake.port = await fake.server.listen(0, HOST);
    return fake;
  }

  async close(): Promise<void> {
    await Promise.all([...this.#connections].map((c) => c.destroy('fake closing')));
    await this.server.close();
  }
}
