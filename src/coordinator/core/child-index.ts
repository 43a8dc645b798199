/**
 * The children of the parents the core holds (children.ts): for each parent
 * in memory, its children by key (the dedupe of ENQUEUE_CHILD) and in the
 * order they were made (the parent's snapshot). The store's unique index on
 * (parent, key) is the durable form; this is what answers without a read.
 *
 * An entry lives while its parent is in memory: it is made with the first
 * child, loaded at recovery for every active job (`RecoveredState.childLinks`),
 * and dropped when the parent leaves memory (its terminal row committed).
 * A parent that comes back into memory from history (a re-run of a FAILED
 * job) may have stored children: its entry is read from the store first,
 * and its calls wait for that read (`markUnloaded`, `hold`, `loaded`).
 */
import type { EnqueueChild } from '../../protocol/messages.js';
import type { ChildLink } from '../../store/store.js';

interface Children {
  readonly byKey: Map<string, string>;
  readonly ids: string[];
}

/** A call that waits for its parent's children to be read. */
export interface HeldChildCall {
  readonly connId: number;
  readonly msg: EnqueueChild;
}

export class ChildIndex {
  readonly #parents = new Map<string, Children>();
  /** Parents whose stored children are not in the index yet (re-run jobs). */
  readonly #unloaded = new Set<string>();
  /** Calls waiting for the read of an unloaded parent's children, by parent. */
  readonly #loading = new Map<string, HeldChildCall[]>();

  /** Parents with at least one child in the index. */
  get parentCount(): number {
    return this.#parents.size;
  }

  /** The parent's children, oldest first (empty: none known). */
  childrenOf(parentJobId: string): readonly string[] {
    return this.#parents.get(parentJobId)?.ids ?? [];
  }

  /** The child made under `key`, if any. */
  find(parentJobId: string, key: string): string | undefined {
    return this.#parents.get(parentJobId)?.byKey.get(key);
  }

  count(parentJobId: string): number {
    return this.#parents.get(parentJobId)?.ids.length ?? 0;
  }

  add(link: ChildLink): void {
    let entry = this.#parents.get(link.parentJobId);
    if (entry === undefined) {
      entry = { byKey: new Map(), ids: [] };
      this.#parents.set(link.parentJobId, entry);
    }
    if (entry.byKey.has(link.childKey)) return;
    entry.byKey.set(link.childKey, link.jobId);
    entry.ids.push(link.jobId);
  }

  /** The parent left memory. */
  forget(parentJobId: string): void {
    this.#parents.delete(parentJobId);
    this.#unloaded.delete(parentJobId);
  }

  /** A parent came back into memory from history: its stored children must be read first. */
  markUnloaded(parentJobId: string): void {
    this.#unloaded.add(parentJobId);
  }

  /** True when the parent's stored children are not in the index yet. */
  isUnloaded(parentJobId: string): boolean {
    return this.#unloaded.has(parentJobId);
  }

  /**
   * Holds a call until the parent's children are read; true when this is
   * the first one held (the caller issues the read).
   */
  hold(parentJobId: string, call: HeldChildCall): boolean {
    const held = this.#loading.get(parentJobId);
    if (held !== undefined) {
      held.push(call);
      return false;
    }
    this.#loading.set(parentJobId, [call]);
    return true;
  }

  /** The read came back: the parent is loaded; the calls that waited for it, in order. */
  loaded(parentJobId: string, links: readonly ChildLink[]): HeldChildCall[] {
    for (const link of links) if (link.parentJobId === parentJobId) this.add(link);
    this.#unloaded.delete(parentJobId);
    return this.#release(parentJobId);
  }

  /** The read failed: the parent stays unloaded; the calls that waited for it, in order. */
  loadFailed(parentJobId: string): HeldChildCall[] {
    return this.#release(parentJobId);
  }

  #release(parentJobId: string): HeldChildCall[] {
    const held = this.#loading.get(parentJobId) ?? [];
    this.#loading.delete(parentJobId);
    return held;
  }
}
