/**
 * The client port of a sharded coordinator in the simulation, as
 * src/server/sharding/shard-router.ts serves it: a client's connection is
 * to the router, which sends each request to the shards it is about
 * (`requestShard`) over connections of its own to each shard's core, one
 * per client connection and shard, and answers once every shard has,
 * their replies put together (merge.ts):
 *
 * - a request about one queue or job goes to that shard (a job id that
 *   names no shard to shard 0);
 * - a request about every queue goes to every shard (an event under one
 *   event id the router gives when the client gave none), but a listing of
 *   jobs without a queue, which goes to one shard (the checks judge the
 *   page each shard gives, and the cursors of all shards look alike);
 * - a batch whose jobs are in several shards is split, each part judged
 *   invalid only when a job in it is, or a key is twice in it; a flow goes
 *   whole to its first job's shard.
 *
 * The router reads what a client wrote at a moment of the simulation's
 * choosing (`forward`): what a client's hang-up cut off before that never
 * reaches a shard, and the router hangs up its connections for it. When a
 * shard's connection ends under it (its coordinator restarted or failed
 * over, or dropped a subscriber), the outcome of what was with that shard
 * is unknown: the client's connection is closed, and so are the others.
 */
import { flowHome, requestShard } from '../../src/protocol/request-shard.js';
import type {
  ClientReply,
  ClientRequest,
  JsonObject,
  SubmitJobs,
} from '../../src/protocol/messages.js';
import { shardOfQueue } from '../../src/protocol/shards.js';
import { mergeAll, mergeSubmitted } from '../../src/server/sharding/merge.js';
import type { ClientPort } from './clients.js';
import { ClientLink, type ClientPeer } from './network.js';
import type { Random } from './random.js';
import type { World } from './world.js';

/** One shard's part of a request: what went there, and its reply once it came. */
interface Part {
  shard: number;
  msg: ClientRequest;
  /** The jobs of a split batch: their places in the client's batch. */
  at?: number[];
  reply?: ClientReply;
}

/** A client's request with the shards: answered once every part is. */
interface Route {
  requestId: number;
  msg: ClientRequest;
  parts: Part[];
}

/** What the router holds for one client connection. */
interface Front {
  link: ClientLink;
  /** Its connection to each shard, opened at the first request there. */
  upstream: Map<number, ClientLink>;
  /** Routes waiting for replies, by "shard/requestId" of a part. */
  waiting: Map<string, Route>;
}

export class SimRouter implements ClientPort {
  readonly #worlds: readonly World[];
  readonly #rng: Random;
  readonly #invalid: WeakSet<object>;
  readonly #fronts = new Map<ClientLink, Front>();
  #nextConnId = 1;
  #nextEventId = 1;

  /** @param invalid requests built invalid on purpose (a split batch's parts are marked here). */
  constructor(worlds: readonly World[], rng: Random, invalid: WeakSet<object>) {
    this.#worlds = worlds;
    this.#rng = rng;
    this.#invalid = invalid;
  }

  openClientLink(owner: ClientPeer, address: string): ClientLink {
    const link = new ClientLink(this.#nextConnId++, owner, address);
    this.#fronts.set(link, { link, upstream: new Map(), waiting: new Map() });
    return link;
  }

  writeClient(link: ClientLink, msg: ClientRequest): number | null {
    return link.request(msg);
  }

  /** True while a client wrote something the router has not read yet. */
  get unread(): boolean {
    for (const front of this.#fronts.values()) if (front.link.toCoordinator.length > 0) return true;
    return false;
  }

  /** The router reads what every client wrote and sends it on. */
  forward(): void {
    for (const front of [...this.#fronts.values()]) {
      const queue = front.link.toCoordinator;
      while (queue.length > 0 && this.#fronts.has(front.link)) {
        const item = queue.shift() as (typeof queue)[number];
        if (item.kind === 'end') this.#close(front);
        else this.#route(front, item.requestId, item.msg);
      }
    }
  }

  #route(front: Front, requestId: number, msg: ClientRequest): void {
    const shards = this.#worlds.length;
    const route: Route = { requestId, msg, parts: [] };
    const target = requestShard(msg, shards);
    if (msg.type === 'LIST_JOBS' && target.kind === 'all') {
      route.parts.push({ shard: this.#rng.int(0, shards - 1), msg });
    } else if (target.kind === 'one') {
      route.parts.push({ shard: target.shard, msg });
    } else if (target.kind === 'nowhere') {
      route.parts.push({ shard: 0, msg });
    } else if (target.kind === 'all') {
      const sent =
        msg.type === 'PUBLISH_EVENT' && msg.eventId == null
          ? { ...msg, eventId: `routed-${this.#nextEventId++}` }
          : msg;
      for (let shard = 0; shard < shards; shard++) route.parts.push({ shard, msg: sent });
    } else if (msg.type === 'SUBMIT_JOBS') {
      route.parts.push(...this.#split(msg));
    } else if (msg.type === 'SUBMIT_FLOW') {
      route.parts.push({ shard: flowHome(msg, shards), msg });
    } else {
      throw new Error(
        `the simulated router cannot send ${msg.type} to shards ${target.shards.join(', ')}`,
      );
    }
    for (const part of route.parts) this.#send(front, route, part);
  }

  /** A batch across shards: one SUBMIT_JOBS per shard, invalid when one of its jobs is. */
  #split(msg: SubmitJobs): Part[] {
    const byShard = new Map<number, { jobs: JsonObject[]; at: number[] }>();
    msg.jobs.forEach((job, at) => {
      const shard = shardOfQueue(
        typeof job.queue === 'string' ? job.queue : null,
        this.#worlds.length,
      );
      const part = byShard.get(shard) ?? { jobs: [], at: [] };
      part.jobs.push(job);
      part.at.push(at);
      byShard.set(shard, part);
    });
    return [...byShard].map(([shard, { jobs, at }]) => {
      const part: SubmitJobs = { type: 'SUBMIT_JOBS', jobs };
      // Invalid with an invalid job, or one key twice in this part.
      const keys = jobs.flatMap((job) =>
        typeof job.idempotencyKey === 'string' ? [job.idempotencyKey] : [],
      );
      if (jobs.some((job) => this.#invalid.has(job)) || new Set(keys).size !== keys.length) {
        this.#invalid.add(part);
      }
      return { shard, msg: part, at };
    });
  }

  #send(front: Front, route: Route, part: Part): void {
    const world = this.#worlds[part.shard] as World;
    let link = front.upstream.get(part.shard);
    if (link === undefined) {
      link = world.openClientLink(this.#peer(front, part.shard), front.link.address);
      front.upstream.set(part.shard, link);
    }
    const requestId = world.writeClient(link, part.msg);
    if (requestId === null)
      throw new Error(`the router's connection to shard ${part.shard} is closed`);
    front.waiting.set(`${part.shard}/${requestId}`, route);
  }

  /** What the router hears on its connection to `shard` for one client connection. */
  #peer(front: Front, shard: number): ClientPeer {
    return {
      onReply: (_link, requestId, msg) => this.#answered(front, shard, requestId, msg),
      onClosed: () => this.#lost(front),
    };
  }

  #answered(front: Front, shard: number, requestId: number, msg: ClientReply): void {
    const key = `${shard}/${requestId}`;
    const route = front.waiting.get(key);
    if (route === undefined) throw new Error(`a reply from shard ${shard} to no request: ${key}`);
    front.waiting.delete(key);
    const part = route.parts.find((p) => p.shard === shard && p.reply === undefined) as Part;
    part.reply = msg;
    if (route.parts.some((p) => p.reply === undefined)) return;
    front.link.owner?.onReply(front.link, route.requestId, this.#merged(route));
  }

  #merged(route: Route): ClientReply {
    const replies = route.parts.map((p) => p.reply as ClientReply);
    if (route.msg.type === 'SUBMIT_JOBS' && route.parts.length > 1) {
      return mergeSubmitted(
        route.msg.jobs.length,
        route.parts.map((p) => ({
          part: { jobs: (p.msg as SubmitJobs).jobs, at: p.at ?? [] },
          reply: p.reply as ClientReply,
        })),
      );
    }
    if (route.parts.length === 1) return replies[0] as ClientReply;
    return mergeAll(route.parts[0]?.msg as ClientRequest, replies);
  }

  /** A shard's connection ended under a client's: the outcome is unknown, the client's is closed. */
  #lost(front: Front): void {
    if (!this.#fronts.has(front.link)) return;
    this.#close(front);
    front.link.closeByCoordinator();
  }

  /** The router is done with a client connection: its connections to the shards hang up. */
  #close(front: Front): void {
    this.#fronts.delete(front.link);
    front.waiting.clear();
    // What the router wrote to a shard is on its way: the shard may still read it.
    for (const link of front.upstream.values()) link.hangUp(link.toCoordinator.length);
  }
}
