/**
 * One budget for the bytes that the connections of a process hold in
 * partially received frames, split so that no group of peers can take what
 * another group needs.
 *
 * A frame that arrives whole within one read costs nothing. A frame spread
 * over several reads is held while the rest arrives (up to 1 MiB); before its
 * payload starts to be held, its connection reserves the frame's declared
 * length here, from the pool of its class and within its address's share:
 *
 * | class     | who                                                   | pool | per address |
 * | --------- | ----------------------------------------------------- | ---- | ----------- |
 * | `pending` | not yet authenticated or registered (frames ≤ 128 KiB) | 1/4  | 1/16        |
 * | `client`  | open client sessions                                  | 3/8  | 1/8         |
 * | `worker`  | registered workers                                    | 3/8  | 1/8         |
 *
 * (fractions of the limit). The pools add up to the limit, so together they
 * never exceed it; peers that have not authenticated can never take room from
 * those that have, clients never from workers nor workers from clients; and
 * within a class no address holds more than its share, so a flood from one
 * address is only ever paced against itself.
 *
 * A reservation that does not fit is not a failure: the connection waits,
 * reading paused (it keeps only the rest of its last read, at most one socket
 * read), until room frees; then the budget grants it, the oldest waiter of
 * each address first. A reservation covers the whole frame, so a frame that
 * has one can always complete: waiting cannot deadlock, and every holder is
 * bounded in time by the frame deadline of its connection. An empty pool or
 * address share grants any one frame whatever its size, so a limit smaller
 * than a frame slows peers down but never stops one.
 *
 * States of an {@link InboundAccount}: `idle` (nothing reserved) ->
 * `holding` (`reserve()` granted) -> `idle` (`release()`); `idle`/`holding`
 * -> `waiting` (`wait()`) -> `holding` (granted); any -> `closed`.
 */
import { normalizeAddress } from './admission.js';

/** Who a connection is, as far as the budget cares. */
export type InboundClass = 'pending' | 'client' | 'worker';

/**
 * Largest frame a connection may send before it has authenticated or
 * registered: room for the largest WORKER_REGISTER (1,024 task types of 64
 * characters is about 70 KB) and any AUTH.
 */
export const PENDING_MAX_FRAME_BYTES = 128 * 1024;

/** Each class's pool and per-address share, as fractions of the limit. */
export const INBOUND_SHARES: {
  readonly [C in InboundClass]: { pool: number; perAddress: number };
} = {
  pending: { pool: 1 / 4, perAddress: 1 / 16 },
  client: { pool: 3 / 8, perAddress: 1 / 8 },
  worker: { pool: 3 / 8, perAddress: 1 / 8 },
};

const CLASSES = Object.keys(INBOUND_SHARES) as InboundClass[];

/** The bytes one class may reserve, and how much it holds now. */
export interface ClassUsage {
  limitBytes: number;
  perAddressBytes: number;
  usedBytes: number;
  /** Connections waiting for room. */
  waiting: number;
}

class Share {
  usedBytes = 0;
  /** Accounts waiting for room, oldest first (a Set keeps insertion order). */
  readonly waiters = new Set<InboundAccount>();
}

class Pool {
  readonly limitBytes: number;
  readonly perAddressBytes: number;
  usedBytes = 0;
  waiting = 0;
  readonly byAddress = new Map<string, Share>();

  constructor(limitBytes: number, perAddressBytes: number) {
    this.limitBytes = limitBytes;
    this.perAddressBytes = perAddressBytes;
  }

  share(address: string): Share {
    let share = this.byAddress.get(address);
    if (share === undefined) this.byAddress.set(address, (share = new Share()));
    return share;
  }

  /** Drops an address's entry once it holds nothing and nobody waits. */
  tidy(address: string, share: Share): void {
    if (share.usedBytes === 0 && share.waiters.size === 0) this.byAddress.delete(address);
  }

  /** Whether holding `bytes` instead of `ownBytes` fits the pool and the address's share. */
  fits(share: Share, ownBytes: number, bytes: number): boolean {
    const poolOthers = this.usedBytes - ownBytes;
    const shareOthers = share.usedBytes - ownBytes;
    return (
      (poolOthers === 0 || poolOthers + bytes <= this.limitBytes) &&
      (shareOthers === 0 || shareOthers + bytes <= this.perAddressBytes)
    );
  }
}

export class InboundBudget {
  /** The bound over every class, in bytes. */
  readonly limitBytes: number;
  readonly #pools: { readonly [C in InboundClass]: Pool };
  #usedBytes = 0;
  #wakeScheduled = false;

  constructor(limitBytes: number) {
    if (!Number.isSafeInteger(limitBytes) || limitBytes < 1) {
      throw new RangeError(`inbound budget must be a positive integer of bytes, got ${limitBytes}`);
    }
    this.limitBytes = limitBytes;
    const pool = (c: InboundClass): Pool => {
      const { pool: share, perAddress } = INBOUND_SHARES[c];
      return new Pool(Math.floor(limitBytes * share), Math.floor(limitBytes * perAddress));
    };
    this.#pools = { pending: pool('pending'), client: pool('client'), worker: pool('worker') };
  }

  /** Bytes reserved right now, over all connections. */
  get usedBytes(): number {
    return this.#usedBytes;
  }

  /** One class's bounds and use. */
  usage(inboundClass: InboundClass): ClassUsage {
    const { limitBytes, perAddressBytes, usedBytes, waiting } = this.#pools[inboundClass];
    return { limitBytes, perAddressBytes, usedBytes, waiting };
  }

  /** Connections waiting for room, over all classes. */
  get waitingCount(): number {
    return CLASSES.reduce((sum, c) => sum + this.#pools[c].waiting, 0);
  }

  /** The account of one connection from `remoteAddress`, starting in `inboundClass`. */
  account(remoteAddress: string, inboundClass: InboundClass): InboundAccount {
    return new InboundAccount(this, normalizeAddress(remoteAddress), inboundClass);
  }

  /** @internal Sets an account's reservation if it fits (always when shrinking). */
  tryHold(account: InboundAccount, bytes: number): boolean {
    const pool = this.#pools[account.inboundClass];
    const share = pool.share(account.address);
    const own = account.reservedBytes;
    const fits =
      bytes <= own ||
      (pool.fits(share, own, bytes) && (share.waiters.size === 0 || share.waiters.has(account)));
    if (fits) this.#set(account, pool, share, bytes);
    else pool.tidy(account.address, share);
    return fits;
  }

  /** @internal Queues an account for `bytes`; {@link InboundAccount.granted} runs when it fits. */
  enqueue(account: InboundAccount): void {
    const pool = this.#pools[account.inboundClass];
    const share = pool.share(account.address);
    if (share.waiters.has(account)) return;
    share.waiters.add(account);
    pool.waiting++;
    // Room may be there already (it was only the queue that said no).
    this.#scheduleWake();
  }

  /** @internal Takes an account out of its queue. */
  dequeue(account: InboundAccount): void {
    const pool = this.#pools[account.inboundClass];
    const share = pool.byAddress.get(account.address);
    if (share?.waiters.delete(account) !== true) return;
    pool.waiting--;
    pool.tidy(account.address, share);
    // The next one of that address may fit now.
    this.#scheduleWake();
  }

  /** @internal Moves an account's reservation to another class (granted whatever it is). */
  move(account: InboundAccount, to: InboundClass, bytes: number): void {
    const from = this.#pools[account.inboundClass];
    this.#set(account, from, from.share(account.address), 0);
    const pool = this.#pools[to];
    account.setClass(to);
    this.#set(account, pool, pool.share(account.address), bytes);
  }

  #set(account: InboundAccount, pool: Pool, share: Share, bytes: number): void {
    const delta = bytes - account.reservedBytes;
    pool.usedBytes += delta;
    share.usedBytes += delta;
    this.#usedBytes += delta;
    account.setReserved(bytes);
    if (delta < 0 && pool.waiting > 0) this.#scheduleWake();
    pool.tidy(account.address, share);
  }

  /** Grants waiters in a later turn, so that no handler runs inside another's call. */
  #scheduleWake(): void {
    if (this.#wakeScheduled) return;
    this.#wakeScheduled = true;
    setImmediate(() => {
      this.#wakeScheduled = false;
      this.#wake();
    });
  }

  /**
   * Grants every waiter that fits, the oldest of each address first; then
   * tells them (after the counts are settled). Bounded by the waiters.
   */
  #wake(): void {
    const granted: InboundAccount[] = [];
    for (const c of CLASSES) {
      const pool = this.#pools[c];
      if (pool.waiting === 0) continue;
      for (const [address, share] of [...pool.byAddress]) {
        for (const account of share.waiters) {
          const bytes = account.wantedBytes;
          if (!pool.fits(share, account.reservedBytes, bytes)) break;
          share.waiters.delete(account);
          pool.waiting--;
          this.#set(account, pool, share, bytes);
          granted.push(account);
        }
        pool.tidy(address, share);
      }
    }
    for (const account of granted) account.granted();
  }
}

/** One connection's place in an {@link InboundBudget} (see the module comment). */
export class InboundAccount {
  readonly address: string;
  readonly #budget: InboundBudget;
  #class: InboundClass;
  #reservedBytes = 0;
  #wantedBytes = 0;
  #onGranted: (() => void) | null = null;
  #closed = false;

  /** @internal created by {@link InboundBudget.account} */
  constructor(budget: InboundBudget, address: string, inboundClass: InboundClass) {
    this.#budget = budget;
    this.address = address;
    this.#class = inboundClass;
  }

  get inboundClass(): InboundClass {
    return this.#class;
  }

  /** Bytes reserved now (one frame's declared length, or 0). */
  get reservedBytes(): number {
    return this.#reservedBytes;
  }

  /** What a waiting account asked for (0 when not waiting). */
  get wantedBytes(): number {
    return this.#onGranted === null ? 0 : this.#wantedBytes;
  }

  get waiting(): boolean {
    return this.#onGranted !== null;
  }

  /**
   * Reserves room for one frame of `bytes`, in place of what this account
   * holds (the frame before it is complete). True when granted now; false
   * when it does not fit (or others of its address wait first).
   */
  reserve(bytes: number): boolean {
    if (this.#closed || this.waiting) return false;
    return this.#budget.tryHold(this, bytes);
  }

  /** Waits for room for `bytes`; once reserved, `onGranted` runs (in a later turn). */
  wait(bytes: number, onGranted: () => void): void {
    if (this.#closed || this.waiting) return;
    this.#wantedBytes = bytes;
    this.#onGranted = onGranted;
    this.#budget.enqueue(this);
  }

  /** The frame is complete (or gone): its room is free again. */
  release(): void {
    if (this.#reservedBytes > 0) this.#budget.tryHold(this, 0);
  }

  /**
   * The connection authenticated or registered: its reservation (and a wait
   * under way) moves to the class it now belongs to.
   */
  reclassify(inboundClass: InboundClass): void {
    if (this.#closed || inboundClass === this.#class) return;
    const onGranted = this.#onGranted;
    if (onGranted !== null) this.#budget.dequeue(this);
    this.#budget.move(this, inboundClass, this.#reservedBytes);
    if (onGranted !== null) this.#budget.enqueue(this);
  }

  /** Releases everything and stops waiting; final. Idempotent. */
  close(): void {
    if (this.#closed) return;
    if (this.#onGranted !== null) this.#budget.dequeue(this);
    this.#onGranted = null;
    this.release();
    this.#closed = true;
  }

  /** @internal */
  setClass(inboundClass: InboundClass): void {
    this.#class = inboundClass;
  }

  /** @internal */
  setReserved(bytes: number): void {
    this.#reservedBytes = bytes;
  }

  /** @internal The budget reserved what this account waited for. */
  granted(): void {
    const onGranted = this.#onGranted;
    this.#onGranted = null;
    this.#wantedBytes = 0;
    if (this.#closed || onGranted === null) return;
    onGranted();
  }
}
