/**
 * The inspections of the shards a sharded coordinator's process leads, made
 * into one, as one coordinator holding all of those shards would show it
 * (the dashboard's overview and its schedules' "served" marks read it):
 * counts added, a worker registered with several of the shards shown once
 * with its slots added up (it splits its capacity among its shard
 * sessions), lists put together. A shard standing by adds nothing (its
 * inspection is empty).
 */
import type { CoreInspection } from '../../coordinator/view.js';
import { PRIORITIES, type JobState } from '../../protocol/messages.js';

type WorkerEntry = CoreInspection['workers'][number];

export function mergeInspections(parts: readonly CoreInspection[]): CoreInspection {
  const byState: Partial<Record<JobState, number>> = {};
  const queuedByTaskType = new Map<string, number>();
  const queuedByPriority = { HIGH: 0, NORMAL: 0, LOW: 0 };
  for (const part of parts) {
    for (const [state, n] of Object.entries(part.activeByState) as [JobState, number][]) {
      byState[state] = (byState[state] ?? 0) + n;
    }
    for (const [type, n] of part.queuedByTaskType) {
      queuedByTaskType.set(type, (queuedByTaskType.get(type) ?? 0) + n);
    }
    for (const priority of PRIORITIES)
      queuedByPriority[priority] += part.queuedByPriority[priority];
  }
  const sum = (of: (part: CoreInspection) => number): number =>
    parts.reduce((n, part) => n + of(part), 0);
  return {
    activeCount: sum((p) => p.activeCount),
    activeByState: byState,
    queuedByTaskType,
    queuedByPriority,
    workers: mergeWorkers(parts.flatMap((p) => p.workers)),
    servedTaskTypes: [...new Set(parts.flatMap((p) => p.servedTaskTypes))],
    freeSlots: sum((p) => p.freeSlots),
    keptLeases: parts.flatMap((p) => p.keptLeases),
    pendingWaits: sum((p) => p.pendingWaits),
    pendingReads: sum((p) => p.pendingReads),
    subscriptions: sum((p) => p.subscriptions),
    subscribers: sum((p) => p.subscribers),
    stalledSubscribers: sum((p) => p.stalledSubscribers),
    scheduledCount: sum((p) => p.scheduledCount),
    farScheduledCount: sum((p) => p.farScheduledCount),
    scheduledHorizon: earliestHorizon(parts),
    wakeArmedAtMs: earliestWake(parts),
    shardLinks: {
      applied: sum((p) => p.shardLinks.applied),
      watched: sum((p) => p.shardLinks.watched),
    },
    queues: parts.flatMap((p) => p.queues),
  };
}

/** One entry per worker id, in the order first seen. */
function mergeWorkers(entries: readonly WorkerEntry[]): WorkerEntry[] {
  const byId = new Map<string, WorkerEntry>();
  for (const w of entries) {
    const seen = byId.get(w.workerId);
    if (seen === undefined) {
      byId.set(w.workerId, { ...w, running: [...w.running] });
      continue;
    }
    seen.capacity += w.capacity;
    seen.prefetch += w.prefetch;
    seen.running.push(...w.running);
    seen.prefetching ||= w.prefetching;
    seen.draining ||= w.draining;
    seen.ending &&= w.ending;
    seen.listingHeld ||= w.listingHeld;
  }
  return [...byId.values()];
}

/** The horizon that is least far: below it, every shard holds its due jobs in memory. */
function earliestHorizon(parts: readonly CoreInspection[]): CoreInspection['scheduledHorizon'] {
  let horizon = { atMs: Infinity, seq: Number.MAX_SAFE_INTEGER };
  for (const { scheduledHorizon: h } of parts) {
    if (h.atMs < horizon.atMs || (h.atMs === horizon.atMs && h.seq < horizon.seq)) horizon = h;
  }
  return { ...horizon };
}

function earliestWake(parts: readonly CoreInspection[]): number | null {
  const armed = parts.flatMap((p) => (p.wakeArmedAtMs === null ? [] : [p.wakeArmedAtMs]));
  return armed.length === 0 ? null : Math.min(...armed);
}
