/**
 * SUBSCRIBE_JOBS and its budgets: at most 16 subscriptions per connection,
 * `maxSubscriptionsPerAddress` for the connections of one address together,
 * `maxSubscriptions` in all. A newcomer that finds its address's budget (or
 * the total) full takes the place of a subscriber that stopped reading: one
 * whose events have been going unread for `subscriberStallMs` (the shell
 * says when a subscriber starts and stops leaving more than it may unread:
 * `subscriberStalled`). That subscriber's connection is closed; the client
 * library dials again and subscribes anew once it reads again. Only when no
 * such subscriber is there is the newcomer refused, with
 * `TOO_MANY_SUBSCRIPTIONS`, and only its request.
 *
 * Addresses come with each request as data (`clientRequest.address`); the
 * in-process client has none and counts toward the total only.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import {
  MAX_FILTER_VALUE_LENGTH,
  MAX_SUBSCRIPTIONS_PER_CONNECTION,
} from '../../protocol/limits.js';
import type { SubscribeJobs } from '../../protocol/messages.js';
import type { CoreState } from './state.js';

/** Who asked: the connection, the request, the peer's address (null: in-process). */
export interface Asker {
  readonly connId: number;
  readonly requestId: number;
  readonly address: string | null;
}

/** SUBSCRIBE_JOBS: checks the filter and the budgets, then answers SUBSCRIBED. */
export function subscribe(s: CoreState, asker: Asker, msg: SubscribeJobs): void {
  const { connId, requestId, address } = asker;
  const { jobId = null, taskType = null, queue = null } = msg.filter;
  for (const [name, value] of [
    ['jobId', jobId],
    ['taskType', taskType],
    ['queue', queue],
  ] as const) {
    if (value !== null && (value.length === 0 || value.length > MAX_FILTER_VALUE_LENGTH)) {
      return s.replyError(
        connId,
        requestId,
        ErrorCode.InvalidRequest,
        `Invalid request: filter.${name} must be 1..${MAX_FILTER_VALUE_LENGTH} characters`,
      );
    }
  }
  const refusal = makeRoom(s, connId, address);
  if (refusal !== null) {
    return s.replyError(connId, requestId, ErrorCode.TooManySubscriptions, refusal);
  }
  s.subscriptions.add({ connId, address, jobId, taskType, queue });
  s.reply(connId, requestId, { type: 'SUBSCRIBED' });
}

/**
 * Makes room for one more subscription on `connId` from `address`, dropping
 * a stalled subscriber where a budget is full; returns why it cannot, or
 * null. Dropping one for the address's budget also frees a place in the
 * total (it held at least one subscription).
 */
function makeRoom(s: CoreState, connId: number, address: string | null): string | null {
  const subs = s.subscriptions;
  const { maxSubscriptions, maxSubscriptionsPerAddress } = s.config;
  if (subs.countFor(connId) >= MAX_SUBSCRIPTIONS_PER_CONNECTION) {
    return `Too many subscriptions on this connection (limit ${MAX_SUBSCRIPTIONS_PER_CONNECTION})`;
  }
  if (address !== null && subs.countForAddress(address) >= maxSubscriptionsPerAddress) {
    if (!dropStalled(s, connId, address)) {
      return `Too many subscriptions from this address (limit ${maxSubscriptionsPerAddress}), and none of them has stopped reading; close one or try again later`;
    }
  }
  if (subs.size >= maxSubscriptions && !dropStalled(s, connId, null)) {
    return `Too many subscriptions on this coordinator (limit ${maxSubscriptions}), and none of them has stopped reading; try again later`;
  }
  return null;
}

/**
 * Drops the subscriber that stalled first among those stalled for at least
 * `subscriberStallMs` (of `address` when given; never the asking
 * connection): its subscriptions go now, its connection is closed. False
 * when there is none.
 */
function dropStalled(s: CoreState, except: number, address: string | null): boolean {
  const notAfterMs = s.nowMs - s.config.subscriberStallMs;
  const victim = s.subscriptions.longestStalled(notAfterMs, address, except);
  if (victim === null) return false;
  const stalledMs = s.nowMs - victim.sinceMs;
  s.subscriptions.dropConnection(victim.connId);
  s.dropClient(
    victim.connId,
    `subscriber dropped: it left its job events unread for ${stalledMs} ms and a new subscriber needed its place`,
  );
  s.emit({
    type: 'subscriber.dropped',
    connId: victim.connId,
    address: victim.address,
    stalledMs,
    budget: address === null ? 'total' : 'address',
  });
  return true;
}

/** The shell says a subscriber started (or stopped) leaving its events unread. */
export function subscriberStalled(s: CoreState, connId: number, stalled: boolean): void {
  s.subscriptions.noteStalled(connId, stalled, s.nowMs);
}
