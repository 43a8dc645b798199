/**
 * What a coordinator that does not lead says: `ERROR` with code NOT_LEADER,
 * a message containing `NOT_LEADER`, and the leader's `host:port` of the same
 * port kind when known.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import type { ErrorMessage } from '../../protocol/messages.js';

/** The refusal for one port kind; `leader` null = unknown (the field stays out). */
export function notLeaderError(port: 'worker' | 'client', leader: string | null): ErrorMessage {
  const where = leader === null ? 'the leader is not known yet' : `the leader is at ${leader}`;
  const message = `NOT_LEADER: this coordinator is a standby (${where}); try the ${port} port of the leader`;
  return leader === null
    ? { type: 'ERROR', code: ErrorCode.NotLeader, message }
    : { type: 'ERROR', code: ErrorCode.NotLeader, message, leader };
}

/**
 * The refusal of a shard's coordinator for a request about another shard's
 * queue or job: NOT_LEADER as a standby says it (clients that follow a
 * leader follow this too), naming that shard's leader when known.
 */
export function otherShardError(shard: number, leader: string | null): ErrorMessage {
  const where = leader === null ? 'its leader is not known yet' : `its leader is at ${leader}`;
  const message = `NOT_LEADER: this request is for shard ${shard}, which this coordinator does not serve (${where})`;
  return leader === null
    ? { type: 'ERROR', code: ErrorCode.NotLeader, message }
    : { type: 'ERROR', code: ErrorCode.NotLeader, message, leader };
}
