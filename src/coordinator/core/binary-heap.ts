/**
 * A binary min-heap over a comparator. Used for the ready queue and the
 * deadline and retry timers: O(log n) push/pop, no full sorts, no scans.
 */
export class BinaryHeap<T> {
  readonly #items: T[] = [];
  readonly #before: (a: T, b: T) => boolean;

  /** @param before true when `a` must come out before `b`. */
  constructor(before: (a: T, b: T) => boolean) {
    this.#before = before;
  }

  get size(): number {
    return this.#items.length;
  }

  peek(): T | undefined {
    return this.#items[0];
  }

  push(item: T): void {
    const items = this.#items;
    items.push(item);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#before(items[i] as T, items[parent] as T)) break;
      this.#swap(i, parent);
      i = parent;
    }
  }

  pop(): T | undefined {
    const items = this.#items;
    const top = items[0];
    const last = items.pop();
    if (items.length > 0 && last !== undefined) {
      items[0] = last;
      this.#siftDown(0);
    }
    return top;
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
    const tmp = items[a] as T;
    items[a] = items[b] as T;
    items[b] = tmp;
  }
}
