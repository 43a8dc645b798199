/**
 * What a coordinator understands, learned by the client without risking
 * other requests.
 *
 * A v1 coordinator (the reference) cannot decode an extension request: it
 * answers `ERROR "Malformed request: Undecodable message …"` and closes the
 * connection, which would fail every request pipelined on it. So the client
 * never sends an extension request on its working connection before it knows
 * the answer: it probes once per coordinator address, on a connection of its
 * own, with `WAIT_JOB` for a job id that cannot exist and a timeout of 0.
 *
 * - `JOB_STATUS`, or an `ERROR` that is an answer (`Unknown job`, and also
 *   `NOT_LEADER`, `UNAUTHENTICATED` or a fail-stop error: a v1 coordinator
 *   never says those) -> supported.
 * - A not-understood answer ({@link isNotUnderstood}: `Malformed request`,
 *   `Undecodable`, `Unsupported request`) or a close before any reply ->
 *   unsupported: `wait` polls `GET_JOB_STATUS` instead.
 * - No connection, or no reply in time -> inconclusive: nothing is
 *   remembered, and the request goes ahead as if supported (it fails on its
 *   own if the coordinator is really gone).
 *
 * Answers are remembered per `host:port` for the life of the process, shared
 * by every client of that address (a bench's many connections probe once).
 * Paging needs no probe: a v1 coordinator ignores `limit`, `state` and
 * `cursor`, which shows in its reply (see list-paging.ts).
 *
 * Whether the coordinator is sharded is learned on a probe's connection too
 * ({@link probeShards}): `LIST_SHARDS`, sent only there and only after the
 * coordinator answered the `WAIT_JOB` probe as one that understands it (or
 * on a connection of its own). More than one shard: the map is remembered
 * with the answers ({@link FeatureCache.shardsOf}) and the client sends
 * requests about one shard to that shard (shard-routing.ts).
 */
import { LocalErrorCode } from '../protocol/error-codes.js';
import { randomUUID } from 'node:crypto';
import { isNotUnderstood } from '../protocol/features.js';
import type { ClientRequest, ShardList } from '../protocol/messages.js';
import type { ClientConnection } from './connection.js';
import { TransportError } from './errors.js';
import type { ShardTable } from './shard-table.js';

/** The client-port extensions a coordinator was found to understand. */
export interface CoordinatorFeatures {
  /** `WAIT_JOB`: the coordinator holds the request until the job is terminal. */
  readonly waitJob: boolean;
}

/** What a v1 coordinator understands. */
export const V1_FEATURES: CoordinatorFeatures = { waitJob: false };
/** What a dtp coordinator understands. */
export const EXTENDED_FEATURES: CoordinatorFeatures = { waitJob: true };

/**
 * Sends the probe on `conn` (which the caller owns and closes) and reads the
 * answer; null when inconclusive.
 */
export async function probeWaitJob(
  conn: ClientConnection,
  timeoutMs: number,
): Promise<CoordinatorFeatures | null> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  try {
    const probe = conn.request({
      type: 'WAIT_JOB',
      jobId: `dtp-probe-${randomUUID()}`,
      timeoutMillis: 0,
    });
    const reply = await Promise.race([probe, expired]);
    if (reply === 'timeout') return null;
    if (reply.type === 'ERROR') return isNotUnderstood(reply) ? V1_FEATURES : EXTENDED_FEATURES;
    return EXTENDED_FEATURES;
  } catch (err) {
    // Closed before any reply: not understood. Anything else: inconclusive.
    if (err instanceof TransportError && err.code === LocalErrorCode.ConnectionLost)
      return V1_FEATURES;
    return null;
  } finally {
    clearTimeout(timer);
  }
}

/** Whether a coordinator address serves a sharded database: its map when so. */
export type ShardKnowledge =
  { readonly sharded: false } | { readonly sharded: true; readonly table: ShardTable };

/** Remembered answers per coordinator address, and the probes under way. */
export class FeatureCache {
  readonly #known = new Map<string, CoordinatorFeatures>();
  readonly #probing = new Map<string, Promise<CoordinatorFeatures | null>>();
  readonly #shards = new Map<string, ShardKnowledge>();

  /** Whether `address` is sharded (with its latest map), if found out. */
  shardsOf(address: string): ShardKnowledge | undefined {
    return this.#shards.get(address);
  }

  /** Remembers whether `address` is sharded, and its map (the latest read replaces the one before). */
  recordShards(address: string, knowledge: ShardKnowledge): void {
    this.#shards.set(address, knowledge);
  }

  /** The remembered answer for `address`, if any. */
  get(address: string): CoordinatorFeatures | undefined {
    return this.#known.get(address);
  }

  /** Remembers an answer (also one learned outside a probe). */
  record(address: string, features: CoordinatorFeatures): void {
    this.#known.set(address, features);
  }

  forget(address: string): void {
    this.#known.delete(address);
    this.#shards.delete(address);
  }

  /**
   * The remembered answer, or the result of `probe` (run at most once at a
   * time per address); null when the probe was inconclusive.
   */
  async learn(
    address: string,
    probe: () => Promise<CoordinatorFeatures | null>,
  ): Promise<CoordinatorFeatures | null> {
    const known = this.#known.get(address);
    if (known !== undefined) return known;
    let running = this.#probing.get(address);
    if (running === undefined) {
      running = probe().then(
        (features) => {
          if (features !== null) this.#known.set(address, features);
          return features;
        },
        () => null,
      );
      this.#probing.set(address, running);
      void running.finally(() => this.#probing.delete(address));
    }
    return running;
  }
}

/** The process-wide cache used unless a client is given its own. */
export const DEFAULT_FEATURE_CACHE = new FeatureCache();

/**
 * Extension features that ride on v1 messages as fields a v1 coordinator
 * would ignore (and so act wrongly): each is probed, on a connection of its
 * own, with a request of the same extension that changes nothing.
 * - `time`: `LIST_SCHEDULES`; without it `SUBMIT_JOB.runAtMillis` would be
 *   ignored and a delayed job run at once.
 * - `flows`: an empty `SUBMIT_FLOW` (refused as invalid by a coordinator that
 *   knows flows; nothing is created); without it `SUBMIT_JOB.dependsOn`
 *   would be ignored and a dependent run before its parents.
 * - `queues`: `LIST_QUEUES`; without it `SUBMIT_JOB.queue` and `groupKey`
 *   would be ignored and the job run outside its queue's pause and limits.
 */
export type ProbedFeature = 'time' | 'flows' | 'queues';

const PROBES: Readonly<Record<ProbedFeature, () => ClientRequest>> = {
  time: () => ({ type: 'LIST_SCHEDULES' }),
  flows: () => ({ type: 'SUBMIT_FLOW', jobs: [] }),
  queues: () => ({ type: 'LIST_QUEUES' }),
};

/** Whether the coordinator understands `feature`, probed on `conn` (the caller's). True/false, or null when inconclusive. */
export async function probeFeature(
  conn: ClientConnection,
  feature: ProbedFeature,
  timeoutMs: number,
): Promise<boolean | null> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  try {
    const reply = await Promise.race([conn.request(PROBES[feature]()), expired]);
    if (reply === 'timeout') return null;
    return !(reply.type === 'ERROR' && isNotUnderstood(reply));
  } catch (err) {
    if (err instanceof TransportError && err.code === LocalErrorCode.ConnectionLost) return false;
    return null;
  } finally {
    clearTimeout(timer);
  }
}

/** Remembered answers of {@link probeFeature} per feature and coordinator address (the process's life). */
export const PROBED_SUPPORT = new Map<string, boolean>();

/**
 * `LIST_SHARDS` on `conn` (a probe's connection, which the caller owns): the
 * list; `unsupported` for a not-understood answer (a coordinator that
 * predates shards); null when inconclusive (no answer in time, another
 * error, the connection gone).
 */
export async function probeShards(
  conn: ClientConnection,
  timeoutMs: number,
): Promise<ShardList | 'unsupported' | null> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  try {
    const reply = await Promise.race([conn.request({ type: 'LIST_SHARDS' }), expired]);
    if (reply === 'timeout') return null;
    if (reply.type === 'SHARD_LIST') return reply;
    return reply.type === 'ERROR' && isNotUnderstood(reply) ? 'unsupported' : null;
  } catch {
    return null;
  } finally {
    clearTimeout(timer);
  }
}
