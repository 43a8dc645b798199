/**
 * A shard's reads of the cluster's outbox in the simulation, as its term
 * makes them (src/coordinator/term/term.ts, `#readOutbox`): one read at a
 * time, from the lowest id; the read says which batches of this term had
 * committed when it began (`committedThrough`), and its answer is handed to
 * the core as one `outboxMessages` input (none when it found nothing).
 *
 * Each of the read's moments is the simulation's to choose: it begins (the
 * poll timer fired), the store answers from what is committed then (commits
 * of any shard may come in between), and the answer waits among the other
 * ready inputs until the coordinator takes it. Now and then the read fails
 * (it is tried again at a later poll), takes only a few messages (the rest
 * come with the next read), or is answered twice: two reads that began at
 * the same moment, the second handed over before any later read begins.
 *
 *   idle --poll--> out --answer--> ready (1 or 2 inputs) --taken--> idle
 *                      \--fails or finds nothing----------------> idle
 */
import type { CoreInput } from '../../src/coordinator/core/types.js';
import type { MemoryStore } from '../../src/store/memory-store.js';
import type { Random } from './random.js';

/** Most messages one read takes (the term's OUTBOX_READ_LIMIT). */
const READ_LIMIT = 100;

type OutboxInput = Extract<CoreInput, { kind: 'outboxMessages' }>;

export interface OutboxReadStats {
  /** Reads that found messages, and those answered twice. */
  delivered: number;
  duplicated: number;
  failed: number;
  /** Messages handed to cores (counting each time one was handed). */
  messages: number;
}

export class OutboxReads {
  readonly #store: MemoryStore;
  readonly #shard: number;
  readonly #rng: Random;
  readonly stats: OutboxReadStats;
  /** A planted bug (tests of the checks): every read says every batch had committed. */
  readonly #claimAll: boolean;
  /** The highest batch of this term known committed. */
  #lastCommitted = 0;
  /** The read out (begun, not answered yet): what it says had committed; null = none. */
  #out: number | null = null;
  /** Its answer, waiting for the coordinator to take it. */
  #ready: OutboxInput[] = [];

  constructor(
    store: MemoryStore,
    shard: number,
    rng: Random,
    stats: OutboxReadStats,
    claimAll = false,
  ) {
    this.#store = store;
    this.#shard = shard;
    this.#rng = rng;
    this.stats = stats;
    this.#claimAll = claimAll;
  }

  /** A batch of this term committed. */
  committed(batchId: number): void {
    this.#lastCommitted = Math.max(this.#lastCommitted, batchId);
  }

  /** True while a read is out or its answer waits: no other read begins. */
  get busy(): boolean {
    return this.#out !== null || this.#ready.length > 0;
  }

  /** True when an answer waits for the coordinator. */
  get ready(): boolean {
    return this.#ready.length > 0;
  }

  /** True when a read is out that the store has not answered yet. */
  get out(): boolean {
    return this.#out !== null;
  }

  /** The poll timer fires: a read begins unless one is under way. */
  poll(): void {
    if (!this.busy) this.#out = this.#claimAll ? Number.MAX_SAFE_INTEGER : this.#lastCommitted;
  }

  /** The store answers the read out, from what is committed now. */
  answer(quiet: boolean): void {
    const committedThrough = this.#out;
    if (committedThrough === null) return;
    this.#out = null;
    const rng = this.#rng;
    if (!quiet && rng.chance(0.03)) {
      this.stats.failed++;
      return;
    }
    const limit = !quiet && rng.chance(0.3) ? rng.int(1, 3) : READ_LIMIT;
    const messages = this.#store.readOutboxNow(this.#shard, 0, limit);
    if (messages.length === 0) return;
    const input: OutboxInput = { kind: 'outboxMessages', messages, committedThrough };
    this.#ready.push(input);
    this.stats.delivered++;
    this.stats.messages += messages.length;
    if (!quiet && rng.chance(0.1)) {
      this.#ready.push({ ...input, messages: structuredClone(messages) });
      this.stats.duplicated++;
      this.stats.messages += messages.length;
    }
  }

  /** The next answer for the coordinator. */
  take(): OutboxInput | undefined {
    return this.#ready.shift();
  }

  /** What a leader that froze had read (it handles them when it wakes). */
  takeAll(): OutboxInput[] {
    const all = this.#ready;
    this.#ready = [];
    return all;
  }

  /** A new term: nothing out, nothing known committed (its batches are numbered afresh). */
  reset(): void {
    this.#lastCommitted = 0;
    this.#out = null;
    this.#ready = [];
  }
}
