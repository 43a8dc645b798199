/**
 * A binary heap whose items can be re-ordered or removed after their key
 * changed: each item's position is tracked, so `update` and `remove` cost
 * O(log n) instead of a scan. Used to keep live workers ordered by free
 * slots.
 */
export class IndexedHeap<T> {
  readonly #items: T[] = [];
  readonly #index = new Map<T, number>();
  readonly #before: (a: T, b: T) => boolean;

  /** @param before true when `a` must come out before `b`. */
  constructor(before: (a: T, b: T) => boolean) {
    this.#before = before;
  }

  get size(): number {
    return this.#items.length;
  }

  has(item: T): boolean {
    return this.#index.has(item);
  }

  peek(): T | undefined {
    return this.#items[0];
  }

  push(item: T): void {
    if (this.#index.has(item)) throw new Error('item is already in the heap');
    this.#items.push(item);
    this.#index.set(item, this.#items.length - 1);
    this.#siftUp(this.#items.length - 1);
  }

  /** Restores the order after `item`'s key changed. */
  update(item: T): void {
    const i = this.#position(item);
    this.#siftDown(this.#siftUp(i));
  }

  remove(item: T): void {
    const i = this.#position(item);
    const last = this.#items.pop() as T;
    this.#index.delete(item);
    if (i === this.#items.length) return; // it was the last one
    this.#items[i] = last;
    this.#index.set(last, i);
    this.#siftDown(this.#siftUp(i));
  }

  #position(item: T): number {
    const i = this.#index.get(item);
    if (i === undefined) throw new Error('item is not in the heap');
    return i;
  }

  /** Moves the item at `start` up while it comes before its parent; returns where it ends. */
  #siftUp(start: number): number {
    let i = start;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#before(this.#items[i] as T, this.#items[parent] as T)) break;
      this.#swap(i, parent);
      i = parent;
    }
    return i;
  }

  #siftDown(start: number): void {
    const items = this.#items;
    let i = start;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let best = i;
      if (left < items.length && this.#before(items[left] as T, items[best] as T)) best = left;
      if (right < items.length && this.#before(items[right] as T, items[best] as T)) best = right;
      if (best === i) return;
      this.#swap(i, best);
      i = best;
    }
  }

  #swap(a: number, b: number): void {
    const items = this.#items;
    const first = items[a] as T;
    const second = items[b] as T;
    items[a] = second;
    items[b] = first;
    this.#index.set(second, a);
    this.#index.set(first, b);
  }
}
