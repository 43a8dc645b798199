/**
 * The `/healthz` answer: a status code a load balancer can route on, and a
 * JSON body for people.
 *
 * One coordinator:
 * - 200 `{"status":"ok","role":"leader",…}`: this coordinator serves;
 * - 503 `{"status":"standby","role":"standby","leader":…}`: a standby (it
 *   answers every request NOT_LEADER); `leader` names the leader's client
 *   address when known;
 * - 503 `{"status":"failed","code":…,"message":…}`: it stopped working (a
 *   failed commit or an internal error).
 *
 * The process of a sharded coordinator (it serves every request through its
 * client port whichever shards it leads, so leading none is no reason to
 * send nobody there):
 * - 200 `{"status":"ok","role":"sharded","shards":S,"led":[…]}` while it is
 *   alive in the database's membership;
 * - 503 `{"status":"isolated",…}` once its membership lapsed (its rounds
 *   have not reached the database for a lease ttl: the others count it gone
 *   and take its shards);
 * - 503 `{"status":"failed",…,"code":…,"message":…}` while the coordinator
 *   of one of its shards has stopped working (it stands by and recovers, as
 *   one coordinator of several does).
 */
import type { CoordinatorView, ShardingStatus } from '../coordinator/view.js';

export type HealthSource = Pick<CoordinatorView, 'failure' | 'status' | 'sharding'>;

export interface HealthAnswer {
  statusCode: 200 | 503;
  body: Record<string, string | number | readonly number[]>;
}

export function healthOf(source: HealthSource): HealthAnswer {
  const sharding = source.sharding?.();
  if (sharding !== undefined) return shardedHealth(source, sharding);
  const { role, epoch, leaderClient } = source.status();
  const where = {
    role,
    ...(epoch === null ? {} : { epoch }),
    ...(leaderClient === null ? {} : { leader: leaderClient }),
  };
  const failure = source.failure;
  if (failure !== null) {
    return {
      statusCode: 503,
      body: { status: 'failed', ...where, code: failure.code, message: failure.message },
    };
  }
  if (role === 'standby') return { statusCode: 503, body: { status: 'standby', ...where } };
  return { statusCode: 200, body: { status: 'ok', ...where } };
}

function shardedHealth(source: HealthSource, sharding: ShardingStatus): HealthAnswer {
  const where = { role: 'sharded', shards: sharding.shards, led: [...sharding.led] };
  const failure = source.failure;
  if (failure !== null) {
    return {
      statusCode: 503,
      body: { status: 'failed', ...where, code: failure.code, message: failure.message },
    };
  }
  if (!sharding.member) return { statusCode: 503, body: { status: 'isolated', ...where } };
  return { statusCode: 200, body: { status: 'ok', ...where } };
}
