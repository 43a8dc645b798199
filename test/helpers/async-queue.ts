/**
 * A FIFO that tests can await: `push` from event handlers, `next(timeoutMs)`
 * from the test. Fails with a clear message instead of hanging.
 */
export class AsyncQueue<T> {
  readonly #items: T[] = [];
  readonly #waiters: ((item: T) => void)[] = [];
  readonly #label: string;

  constructor(label: string) {
    this.#label = label;
  }

  push(item: T): void {
    const waiter = this.#waiters.shift();
    if (waiter !== undefined) waiter(item);
    else this.#items.push(item);
  }

  get size(): number {
    return this.#items.length;
  }

  /** Everything queued right now, removed from the queue. */
  drain(): T[] {
    return this.#items.splice(0);
  }

  next(timeoutMs = 5_000): Promise<T> {
    const item = this.#items.shift();
    if (item !== undefined) return Promise.resolve(item);
    return new Promise<T>((resolve, reject) => {
      const waiter = (value: T): void => {
        clearTimeout(timer);
        resolve(value);
      };
      const timer = setTimeout(() => {
        const i = this.#waiters.indexOf(waiter);
        if (i >= 0) this.#waiters.splice(i, 1);
        reject(new Error(`no ${this.#label} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#waiters.push(waiter);
    });
  }
}
