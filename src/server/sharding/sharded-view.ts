/**
 * A sharded coordinator's process as its HTTP port sees it: one
 * {@link CoordinatorView} over the coordinators of the shards inside it and
 * the requests its client port serves.
 *
 * - `request`: through a router of its own (router-requests.ts), so every
 *   request of the JSON API is served as the client port serves it: about
 *   one shard, by that shard's leader wherever it is; about every queue, by
 *   every shard, merged.
 * - `events`: the core events of the shards this process leads (each
 *   shard's coordinator publishes only while it leads). The other shards'
 *   events are not followed: the live stream and the activity charts of one
 *   process show the shards it leads.
 * - `inspect`: the inspections of the shards it leads, merged
 *   (merge-inspection.ts); `dependentsOf`: the dependents those shards index.
 * - `status`, `sharding`, `failure`: the process as a whole (/healthz, see
 *   src/http/health.ts); a shard whose coordinator stopped working names
 *   itself in the failure. `integrityProblems`: every shard's, named so.
 */
import { EventEmitter } from 'node:events';
import type { ClientReply, ClientRequest } from '../../protocol/messages.js';
import type {
  CoordinatorView,
  CoreEvent,
  CoreInspection,
  Failure,
  RoleStatus,
  ShardingStatus,
} from '../../coordinator/view.js';
import { mergeInspections } from './merge-inspection.js';

/** What the view reads of its sharded coordinator (sharded-coordinator.ts). */
export interface ShardedViewHost {
  readonly shards: number;
  /** The coordinator of each shard in this process, in shard order. */
  readonly inner: readonly CoordinatorView[];
  /** True while it counts as alive in the membership and is not stopping. */
  memberAlive(): boolean;
  /** One request as the client port serves it (RouterRequests.request). */
  request(msg: ClientRequest): Promise<ClientReply>;
}

export class ShardedView implements CoordinatorView {
  readonly events = new EventEmitter<{ event: [CoreEvent] }>();
  readonly #host: ShardedViewHost;
  readonly #relay = (event: CoreEvent): void => void this.events.emit('event', event);

  constructor(host: ShardedViewHost) {
    this.#host = host;
    for (const inner of host.inner) inner.events.on('event', this.#relay);
  }

  request(msg: ClientRequest): Promise<ClientReply> {
    return this.#host.request(msg);
  }

  inspect(): CoreInspection {
    return mergeInspections(this.#led().map((shard) => this.#inner(shard).inspect()));
  }

  /** The dependents the shards led here index, up to `limit` (none of the other shards'). */
  dependentsOf(jobId: string, limit: number): string[] {
    const found = new Set<string>();
    for (const shard of this.#led()) {
      if (found.size >= limit) break;
      for (const id of this.#inner(shard).dependentsOf(jobId, limit - found.size)) found.add(id);
    }
    return [...found].slice(0, limit);
  }

  /**
   * The process as a whole: `leader` while it serves (a member of the
   * cluster), else `standby`; no epoch or leader (each shard has its own).
   */
  status(): RoleStatus {
    return {
      role: this.#host.memberAlive() ? 'leader' : 'standby',
      epoch: null,
      leaderClient: null,
      leaderWorker: null,
    };
  }

  sharding(): ShardingStatus {
    return { shards: this.#host.shards, led: this.#led(), member: this.#host.memberAlive() };
  }

  /** The failure of the first shard (in shard order) whose coordinator stopped working. */
  get failure(): Failure | null {
    for (const [shard, inner] of this.#host.inner.entries()) {
      const failure = inner.failure;
      if (failure !== null)
        return { code: failure.code, message: `shard ${shard}: ${failure.message}` };
    }
    return null;
  }

  /** Every shard's problems, each named with its shard; null until some shard's check has run. */
  get integrityProblems(): readonly string[] | null {
    let problems: string[] | null = null;
    for (const [shard, inner] of this.#host.inner.entries()) {
      const found = inner.integrityProblems;
      if (found === null) continue;
      problems ??= [];
      for (const problem of found) problems.push(`shard ${shard}: ${problem}`);
    }
    return problems;
  }

  /** Stops relaying the shards' events. Idempotent. */
  close(): void {
    for (const inner of this.#host.inner) inner.events.off('event', this.#relay);
  }

  /** The shards whose coordinator here serves now. */
  #led(): number[] {
    return this.#host.inner.flatMap((inner, shard) =>
      inner.status().role === 'leader' ? [shard] : [],
    );
  }

  #inner(shard: number): CoordinatorView {
    const inner = this.#host.inner[shard];
    if (inner === undefined) throw new RangeError(`no shard ${shard}`);
    return inner;
  }
}
