/**
 * The simulation's model of the budgets per address (budget-checks.ts) can
 * fail: it reports a subscription the budgets refuse, a refusal they allow,
 * a subscriber dropped that had not stalled long enough, and core counts
 * that disagree with it. (A checker that can never fail proves nothing.)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CoreConfig, Effect } from '../../src/coordinator/core/types.js';
import type { ClientReply } from '../../src/protocol/messages.js';
import { BudgetChecks } from './budget-checks.js';
import { Judge } from './violation.js';
import type { HandledInput } from './world.js';

const CONFIG = {
  maxSubscriptions: 3,
  maxSubscriptionsPerAddress: 2,
  maxWaitsPerAddress: 2,
  subscriberStallMs: 1_000,
} as CoreConfig;

const A = '10.0.0.1';
let nextRequestId = 0;

function handled(input: HandledInput['input'], effects: Effect[], nowMs: number): HandledInput {
  return {
    input,
    effects,
    activeBefore: 0,
    activeAfter: 0,
    scheduledBefore: 0,
    scheduledAfter: 0,
    nowMs,
    linkWorkerId: null,
    linkClosedByCore: false,
    currentAtSend: false,
  };
}

/** A SUBSCRIBE_JOBS from `address` on `connId` answered `reply`, dropping `dropped`. */
function subscribe(
  checks: BudgetChecks,
  connId: number,
  reply: ClientReply,
  options: { address?: string; nowMs?: number; dropped?: number[] } = {},
): void {
  const requestId = nextRequestId++;
  const effects: Effect[] = [];
  for (const victim of options.dropped ?? []) {
    effects.push({ kind: 'close', connId: victim, reason: 'dropped', abrupt: true });
    effects.push({
      kind: 'event',
      event: {
        type: 'subscriber.dropped',
        connId: victim,
        address: A,
        stalledMs: 0,
        budget: 'address',
      },
    });
  }
  effects.push({ kind: 'reply', connId, requestId, msg: reply });
  checks.onHandled(
    handled(
      {
        kind: 'clientRequest',
        connId,
        requestId,
        msg: { type: 'SUBSCRIBE_JOBS', filter: {} },
        address: options.address ?? A,
      },
      effects,
      options.nowMs ?? 0,
    ),
  );
}

const SUBSCRIBED: ClientReply = { type: 'SUBSCRIBED' };
const REFUSED: ClientReply = { type: 'ERROR', code: 'TOO_MANY_SUBSCRIPTIONS', message: 'full' };

function full(): BudgetChecks {
  const checks = new BudgetChecks(new Judge(7), CONFIG);
  subscribe(checks, 1, SUBSCRIBED);
  subscribe(checks, 2, SUBSCRIBED);
  return checks;
}

function stall(checks: BudgetChecks, connId: number, nowMs: number): void {
  checks.onHandled(handled({ kind: 'subscriberStalled', connId, stalled: true }, [], nowMs));
}

describe('simulation checker: budgets per address', () => {
  it('reports a subscription past the budget of its address', () => {
    assert.throws(() => subscribe(full(), 3, SUBSCRIBED), /the model expects a refusal/);
  });

  it('reports a refusal where a stalled subscriber could have made room', () => {
    const checks = full();
    stall(checks, 1, 0);
    assert.throws(
      () => subscribe(checks, 3, REFUSED, { nowMs: 1_000 }),
      /the model expects SUBSCRIBED dropping \[1\]/,
    );
  });

  it('reports a subscriber dropped before it stalled long enough', () => {
    const checks = full();
    stall(checks, 1, 0);
    assert.throws(
      () => subscribe(checks, 3, SUBSCRIBED, { nowMs: 999, dropped: [1] }),
      /the model expects a refusal dropping \[\]/,
    );
  });

  it('accepts the drop the budgets call for, then judges the core against the model', () => {
    const checks = full();
    stall(checks, 1, 0);
    subscribe(checks, 3, SUBSCRIBED, { nowMs: 1_000, dropped: [1] });
    const budgets = {
      waitsByAddress: new Map<string, number>(),
      subscriptionsByAddress: new Map([[A, 2]]),
      stalledSubscribers: new Map<number, number>(),
    };
    checks.checkStep(budgets, 2, new Map());
    assert.throws(
      () =>
        checks.checkStep({ ...budgets, subscriptionsByAddress: new Map([[A, 3]]) }, 3, new Map()),
      /the core holds 3 subscriptions, the model 2/,
    );
  });
});
