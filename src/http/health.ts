/**
 * The `/healthz` answer: a status code a load balancer can route on, and a
 * JSON body for people.
 *
 * - 200 `{"status":"ok","role":"leader",…}`: this coordinator serves;
 * - 503 `{"status":"standby","role":"standby","leader":…}`: a standby (it
 *   answers every request NOT_LEADER); `leader` names the leader's client
 *   address when known;
 * - 503 `{"status":"failed","code":…,"message":…}`: it stopped working (a
 *   failed commit or an internal error).
 */
import type { CoordinatorView } from '../coordinator/view.js';

export type HealthSource = Pick<CoordinatorView, 'failure' | 'status'>;

export interface HealthAnswer {
  statusCode: 200 | 503;
  body: Record<string, string | number>;
}

export function healthOf(source: HealthSource): HealthAnswer {
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
