/**
 * The budgets kept per address and the drop of stalled subscribers, judged
 * against a model:
 *
 * - at handle time, a SUBSCRIBE_JOBS is answered SUBSCRIBED or refused
 *   TOO_MANY_SUBSCRIPTIONS exactly as the budgets say: refused when its
 *   connection holds 16, or its address's budget (or the total) is full and
 *   no other subscriber has been stalled for `subscriberStallMs`; where one
 *   has, the one that stalled first (of the asker's address, for the
 *   address's budget) is dropped instead (its connection closed, a
 *   `subscriber.dropped` event), and nobody else is;
 * - nothing else ever drops a subscriber or closes a client connection;
 * - after every step, the core's subscriptions and waits per address, and
 *   its stalled subscribers, agree with the model, and no address holds more
 *   than its budget.
 *
 * Waits are modelled by TimingChecks (timing.ts); this model adds which
 * address each connection came from.
 */
import { MAX_SUBSCRIPTIONS_PER_CONNECTION } from '../../src/protocol/limits.js';
import type { CoreBudgets } from '../../src/coordinator/core/core.js';
import type { CoreConfig, Effect } from '../../src/coordinator/core/types.js';
import type { Judge } from './violation.js';
import type { HandledInput } from './world.js';

type RequestInput = Extract<HandledInput['input'], { kind: 'clientRequest' }>;

export class BudgetChecks {
  readonly #judge: Judge;
  readonly #config: CoreConfig;
  /** Subscriptions per client connection holding any. */
  readonly #subs = new Map<number, number>();
  /** The address of every client connection that sent a request. */
  readonly #addressOf = new Map<number, string | null>();
  /** Subscriber connections stalled, and since when, in the order they stalled. */
  readonly #stalled = new Map<number, number>();
  /** Subscribers dropped and refusals, for the report. */
  readonly counts = { dropped: 0, refused: 0 };

  constructor(judge: Judge, config: CoreConfig) {
    this.#judge = judge;
    this.#config = config;
  }

  /** The address a client connection's requests came from (null: unknown or in-process). */
  addressOf(connId: number): string | null {
    return this.#addressOf.get(connId) ?? null;
  }

  onHandled(h: HandledInput): void {
    const input = h.input;
    if (input.kind === 'clientRequest') this.#addressOf.set(input.connId, input.address ?? null);
    const dropped = droppedIn(h.effects);
    if (input.kind === 'clientRequest' && input.msg.type === 'SUBSCRIBE_JOBS') {
      this.#judgeSubscribe(input, h, dropped);
    } else {
      this.#judge.check(
        dropped.length === 0 && !closesClient(h.effects, this.#addressOf),
        () => `a subscriber was dropped or a client connection closed on ${input.kind}`,
      );
    }
    if (input.kind === 'clientClosed') this.#forget(input.connId, true);
    if (input.kind === 'subscriberStalled') {
      const { connId, stalled } = input;
      if (!stalled) this.#stalled.delete(connId);
      else if (this.#subs.has(connId) && !this.#stalled.has(connId))
        this.#stalled.set(connId, h.nowMs);
    }
  }

  /** The expected answer to a SUBSCRIBE_JOBS, then what the core did. */
  #judgeSubscribe(input: RequestInput, h: HandledInput, dropped: number[]): void {
    const judge = this.#judge;
    const reply = h.effects.find(
      (e): e is Extract<Effect, { kind: 'reply' }> =>
        e.kind === 'reply' && e.connId === input.connId && e.requestId === input.requestId,
    );
    if (reply?.msg.type === 'ERROR' && reply.msg.code === 'INVALID_REQUEST') {
      judge.check(dropped.length === 0, () => 'an invalid SUBSCRIBE_JOBS dropped a subscriber');
      return;
    }
    const expected = this.#expect(input.connId, input.address ?? null, h.nowMs);
    const what = (): string =>
      `SUBSCRIBE_JOBS on ${input.connId} answered ${JSON.stringify(reply?.msg)} dropping [${dropped.join(',')}]; the model expects ${expected.refused ? 'a refusal' : 'SUBSCRIBED'} dropping [${expected.drops.join(',')}]`;
    const refused = reply?.msg.type === 'ERROR' && reply.msg.code === 'TOO_MANY_SUBSCRIPTIONS';
    judge.check(
      (refused || reply?.msg.type === 'SUBSCRIBED') && refused === expected.refused,
      what,
    );
    judge.check(
      dropped.length === expected.drops.length && dropped.every((c, i) => c === expected.drops[i]),
      what,
    );
    for (const connId of dropped) {
      judge.check(
        h.effects.some((e) => e.kind === 'close' && e.connId === connId),
        () => `subscriber ${connId} dropped without closing its connection`,
      );
      this.#forget(connId, false);
    }
    if (refused) this.counts.refused++;
    this.counts.dropped += dropped.length;
    if (!refused) this.#subs.set(input.connId, (this.#subs.get(input.connId) ?? 0) + 1);
  }

  /** What the budgets say of one more subscription (the model is not changed). */
  #expect(connId: number, address: string | null, nowMs: number): Expectation {
    const config = this.#config;
    const drops: number[] = [];
    if ((this.#subs.get(connId) ?? 0) >= MAX_SUBSCRIPTIONS_PER_CONNECTION)
      return { refused: true, drops };
    const notAfterMs = nowMs - config.subscriberStallMs;
    const victim = (of: string | null): number | null => {
      for (const [c, since] of this.#stalled) {
        if (since > notAfterMs || c === connId || drops.includes(c)) continue;
        if (of === null || this.addressOf(c) === of) return c;
      }
      return null;
    };
    const held = (of: string | null): number => {
      let n = 0;
      for (const [c, count] of this.#subs) {
        if (drops.includes(c)) continue;
        if (of === null || this.addressOf(c) === of) n += count;
      }
      return n;
    };
    if (address !== null && held(address) >= config.maxSubscriptionsPerAddress) {
      const v = victim(address);
      if (v === null) return { refused: true, drops };
      drops.push(v);
    }
    if (held(null) >= config.maxSubscriptions) {
      const v = victim(null);
      if (v === null) return { refused: true, drops };
      drops.push(v);
    }
    return { refused: false, drops };
  }

  #forget(connId: number, closed: boolean): void {
    this.#subs.delete(connId);
    this.#stalled.delete(connId);
    if (closed) this.#addressOf.delete(connId);
  }

  /** After every step: the core's counts agree with the model and keep their budgets. */
  checkStep(budgets: CoreBudgets, subscriptions: number, waitsByConn: Map<number, number>): void {
    const judge = this.#judge;
    const config = this.#config;
    const subsByAddress = new Map<string, number>();
    let total = 0;
    for (const [connId, count] of this.#subs) {
      total += count;
      const address = this.addressOf(connId);
      if (address !== null) subsByAddress.set(address, (subsByAddress.get(address) ?? 0) + count);
    }
    const waitsByAddress = new Map<string, number>();
    for (const [connId, count] of waitsByConn) {
      const address = this.addressOf(connId);
      if (address !== null) waitsByAddress.set(address, (waitsByAddress.get(address) ?? 0) + count);
    }
    judge.check(
      total === subscriptions && total <= config.maxSubscriptions,
      () =>
        `the core holds ${subscriptions} subscriptions, the model ${total} (of ${config.maxSubscriptions})`,
    );
    sameCounts(
      judge,
      'subscriptions',
      budgets.subscriptionsByAddress,
      subsByAddress,
      config.maxSubscriptionsPerAddress,
    );
    sameCounts(judge, 'waits', budgets.waitsByAddress, waitsByAddress, config.maxWaitsPerAddress);
    const stalled = [...budgets.stalledSubscribers];
    const model = [...this.#stalled];
    judge.check(
      stalled.length === model.length &&
        stalled.every(([c, at], i) => model[i]?.[0] === c && model[i]?.[1] === at),
      () => `stalled subscribers: core ${JSON.stringify(stalled)}, model ${JSON.stringify(model)}`,
    );
  }

  /** The process died: no connection survives. */
  onCrash(): void {
    this.#subs.clear();
    this.#stalled.clear();
    this.#addressOf.clear();
  }
}

interface Expectation {
  refused: boolean;
  drops: number[];
}

/** The connections of the `subscriber.dropped` events, in order. */
function droppedIn(effects: readonly Effect[]): number[] {
  const out: number[] = [];
  for (const e of effects) {
    if (e.kind === 'event' && e.event.type === 'subscriber.dropped') out.push(e.event.connId);
  }
  return out;
}

/** True when a close effect names a client connection (one that sent requests). */
function closesClient(effects: readonly Effect[], clients: Map<number, unknown>): boolean {
  return effects.some((e) => e.kind === 'close' && clients.has(e.connId));
}

function sameCounts(
  judge: Judge,
  what: string,
  core: ReadonlyMap<string, number>,
  model: ReadonlyMap<string, number>,
  cap: number,
): void {
  const show = (m: ReadonlyMap<string, number>): string => JSON.stringify([...m]);
  judge.check(
    core.size === model.size && [...model].every(([a, n]) => core.get(a) === n && n <= cap),
    () => `${what} per address: core ${show(core)}, model ${show(model)}, budget ${cap}`,
  );
}
