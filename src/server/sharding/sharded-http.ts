/**
 * The HTTP port of a sharded coordinator's process (`--http-port` with
 * `--shards`): the HTTP server one coordinator has (dashboard, JSON API,
 * `/metrics`, `/healthz`; its tokens, TLS and Host checks alike), started
 * through the same {@link HttpPortFactory}, over the process's view
 * (sharded-view.ts) and metrics (sharded-metrics.ts). Its requests go
 * through a router of their own (router-requests.ts).
 */
import { advertisedHost } from '../../coordinator/advertise.js';
import type { Coordinator, CoordinatorDeps } from '../../coordinator/coordinator.js';
import { createCronEvaluator } from '../../coordinator/cron.js';
import type { CoordinatorOptions } from '../../coordinator/options.js';
import type { Ports } from '../../coordinator/ports/ports.js';
import type { HttpPort, HttpPortFactory } from '../../coordinator/view.js';
import { RouterRequests } from './router-requests.js';
import type { ShardDirectory, ShardRouterOptions } from './shard-router.js';
import { ShardedMetrics } from './sharded-metrics.js';
import { ShardedView } from './sharded-view.js';

/** What the HTTP port reads of its sharded coordinator (sharded-coordinator.ts). */
export interface ShardedHttpHost {
  readonly shards: number;
  /** The coordinator of each shard in this process, in shard order (all started). */
  readonly inner: readonly Coordinator[];
  /** The process's public ports: their guard (tokens, TLS) and connection counts. */
  readonly ports: Ports;
  /** Where each shard is served, as the client port's router sees it. */
  readonly directory: ShardDirectory;
  readonly routerOptions: ShardRouterOptions;
  /** True while it counts as alive in the membership and is not stopping. */
  memberAlive(): boolean;
  /** The epoch of a shard's lease as known here; 0 = never led. */
  epochOf(shard: number): number;
  /** Messages waiting in the outbox, by target shard. */
  outboxBacklog(): Promise<readonly number[]>;
  /** The shards' shared writer's counts. */
  writerStats(): { readonly transactions: number; readonly parts: number };
}

export class ShardedHttp {
  readonly #port: HttpPort;
  readonly #view: ShardedView;
  readonly #requests: RouterRequests;
  #closing: Promise<void> | null = null;

  private constructor(port: HttpPort, view: ShardedView, requests: RouterRequests) {
    this.#port = port;
    this.#view = view;
    this.#requests = requests;
  }

  /** Binds the port `options.metricsPort` on `options.bindHost`; rejects if it cannot. */
  static async open(
    host: ShardedHttpHost,
    options: CoordinatorOptions,
    start: HttpPortFactory,
    deps: Pick<CoordinatorDeps, 'uiDir' | 'httpLimits'>,
  ): Promise<ShardedHttp> {
    const requests = new RouterRequests(host.directory, host.routerOptions);
    const view = new ShardedView({
      shards: host.shards,
      inner: host.inner,
      memberAlive: () => host.memberAlive(),
      request: (msg) => requests.request(msg),
    });
    const guard = host.ports.guard;
    const metrics = new ShardedMetrics(
      {
        shards: host.shards,
        inner: host.inner,
        ports: {
          events: guard.events,
          connectionCounts: () => host.ports.connectionCounts(),
          pushedEvents: () => host.ports.pushedEvents,
          guard,
        },
        leads: (shard) => host.inner[shard]?.status().role === 'leader',
        epochOf: (shard) => host.epochOf(shard),
        outboxBacklog: () => host.outboxBacklog(),
        writerStats: () => host.writerStats(),
      },
      { maxActiveJobs: options.maxActiveJobs },
    );
    try {
      const port = await start(view, {
        port: options.metricsPort ?? 0,
        host: options.bindHost,
        maxActiveJobs: options.maxActiveJobs,
        tls: guard.tls,
        tokens: guard.access,
        metrics,
        cron: createCronEvaluator(),
        report: (event) => guard.report(event),
        allowedHosts: options.httpAllowedHosts ?? [],
        ownNames: [options.bindHost, advertisedHost(options)],
        ...(deps.uiDir !== undefined && { uiDir: deps.uiDir }),
        limits: {
          maxStreamsPerAddress: options.maxHttpStreamsPerAddress,
          streamStallMs: options.subscriberStallMs,
          ...deps.httpLimits,
        },
      });
      return new ShardedHttp(port, view, requests);
    } catch (err) {
      view.close();
      await requests.close();
      throw err;
    }
  }

  /** The port actually bound. */
  get port(): number {
    return this.#port.port;
  }

  /** Stops listening, then answers what is still open and closes the router's connections. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      await this.#port.close();
      this.#view.close();
      await this.#requests.close();
    })();
    return this.#closing;
  }
}
