/**
 * `/metrics` of a sharded coordinator's process: one exposition made of
 *
 * - each shard's coordinator's own metrics (metrics.ts and net-metrics.ts,
 *   as one coordinator exports them), every series labelled `shard="<n>"`:
 *   a shard led elsewhere shows its gauges at 0 here, so a sum over the
 *   processes counts every shard once. Their leadership gauges (`dtp_leader`,
 *   `dtp_role`, `dtp_leader_epoch`) are left out for the per-shard ones below,
 *   and so are their series of the HTTP port (they have none);
 * - the process's own: its public worker and client ports and the HTTP port
 *   (net-metrics.ts, no `shard` label), Node.js and process metrics, and per
 *   shard `dtp_shard_leader` (1 while this process leads it), `dtp_shard_epoch`
 *   (its lease's epoch as known here) and `dtp_shard_outbox_messages`
 *   (messages to it waiting in `dtp.shard_outbox`, read at each scrape), and
 *   the shared writer's `dtp_shard_commits_total` and
 *   `dtp_shard_commit_parts_total`.
 *
 * The registries are put together at each scrape with prom-client's
 * aggregation, which keeps series with different labels apart (nothing is
 * summed: no two share their labels). The process metrics stay out of it:
 * some of them aggregate by dropping themselves.
 */
import { AggregatorRegistry, Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { MetricsText } from '../../coordinator/view.js';
import { CoordinatorMetrics, type MetricsSource } from '../../coordinator/observability/metrics.js';
import {
  registerNetMetrics,
  type NetMetricsSource,
} from '../../coordinator/observability/net-metrics.js';

/** The shards' families replaced by the per-shard gauges of the process. */
const REPLACED = new Set(['dtp_leader', 'dtp_role', 'dtp_leader_epoch']);

/** What the metrics read of the process (sharded-coordinator.ts). */
export interface ShardedMetricsSource {
  readonly shards: number;
  /** The coordinator of each shard in this process, in shard order. */
  readonly inner: readonly (MetricsSource & NetMetricsSource)[];
  /** Its public worker and client ports. */
  readonly ports: NetMetricsSource;
  /** 1 per shard this process leads and serves now. */
  leads(shard: number): boolean;
  /** The epoch of the shard's lease as known here; 0 = never led. */
  epochOf(shard: number): number;
  /** Messages waiting in the outbox, by target shard; rejects when the database is out of reach. */
  outboxBacklog(): Promise<readonly number[]>;
  /** The shards' shared writer's transactions and the shards' parts they carried (shard-writer.ts). */
  writerStats(): { readonly transactions: number; readonly parts: number };
}

export class ShardedMetrics implements MetricsText {
  /** Node.js and process metrics. */
  readonly #process = new Registry();
  /** The process's ports and the per-shard gauges. */
  readonly #own = new Registry();
  readonly #shards: Registry[];

  constructor(source: ShardedMetricsSource, options: { maxActiveJobs: number }) {
    collectDefaultMetrics({ register: this.#process });
    registerNetMetrics(this.#own, source.ports);
    registerShardGauges(this.#own, source);
    this.#shards = source.inner.map((inner, shard) => {
      const metrics = new CoordinatorMetrics(inner, {
        maxActiveJobs: options.maxActiveJobs,
        defaultMetrics: false,
      });
      registerNetMetrics(metrics.registry, inner);
      metrics.registry.setDefaultLabels({ shard: String(shard) });
      return metrics.registry;
    });
  }

  get contentType(): string {
    return this.#own.contentType;
  }

  async text(): Promise<string> {
    const parts = await Promise.all(
      [this.#own, ...this.#shards].map((registry) => registry.getMetricsAsJSON()),
    );
    const [own = [], ...shards] = parts;
    const merged = AggregatorRegistry.aggregate([
      own,
      ...shards.map((metrics) =>
        metrics
          .filter((m) => !REPLACED.has(m.name))
          // A shard's coordinator has no HTTP port: its zeros there would only mislead.
          .map((m) => ({ ...m, values: m.values.filter((v) => v.labels.port !== 'http') })),
      ),
    ]);
    return `${await this.#process.metrics()}${await merged.metrics()}`;
  }
}

function registerShardGauges(registry: Registry, source: ShardedMetricsSource): void {
  const registers = [registry];
  const shards = Array.from({ length: source.shards }, (_, shard) => shard);
  new Gauge<'shard'>({
    name: 'dtp_shard_leader',
    help: '1 while this process leads the shard (its coordinator there serves), else 0',
    labelNames: ['shard'],
    registers,
    collect() {
      for (const shard of shards) this.set({ shard: String(shard) }, source.leads(shard) ? 1 : 0);
    },
  });
  new Gauge<'shard'>({
    name: 'dtp_shard_epoch',
    help: "Epoch of the shard's lease as this process knows it (its own while it leads the shard, else its last round's read); 0 = never led",
    labelNames: ['shard'],
    registers,
    collect() {
      for (const shard of shards) this.set({ shard: String(shard) }, source.epochOf(shard));
    },
  });
  new Counter({
    name: 'dtp_shard_commits_total',
    help: 'Transactions the shards led here committed through their shared write connection',
    registers,
    collect() {
      this.reset();
      this.inc(source.writerStats().transactions);
    },
  });
  new Counter({
    name: 'dtp_shard_commit_parts_total',
    help: "Shards' parts of those transactions (one per shard written): parts / commits is how many shards one transaction carries",
    registers,
    collect() {
      this.reset();
      this.inc(source.writerStats().parts);
    },
  });
  new Gauge<'shard'>({
    name: 'dtp_shard_outbox_messages',
    help: 'Messages from other shards waiting in dtp.shard_outbox for the shard (read from the database at each scrape; absent when it could not be read)',
    labelNames: ['shard'],
    registers,
    async collect() {
      this.reset();
      const backlog = await source.outboxBacklog().catch(() => null);
      if (backlog === null) return;
      for (const shard of shards) this.set({ shard: String(shard) }, backlog[shard] ?? 0);
    },
  });
}
