/**
 * What a worker says it still holds when it registers again: as many held
 * attempts as the registration frame has room for (a connection may send at
 * most {@link PENDING_MAX_FRAME_BYTES} before it registers), and, when more
 * are held, the rest in HELD_ATTEMPTS parts once a coordinator that offers
 * `moreHeld` has registered it (docs/PROTOCOL.md, "Lists in parts").
 */
import { PENDING_MAX_FRAME_BYTES } from '../net/inbound-budget.js';
import { MAX_HELD_ATTEMPTS, MAX_HELD_ATTEMPTS_PER_MESSAGE } from '../protocol/limits.js';
import type { HeldAttempt, WorkerRegister } from '../protocol/messages.js';

/** Room kept in the frame for its header and anything the estimate leaves out, bytes. */
const FRAME_MARGIN_BYTES = 2_048;

/** The attempts a registration lists, and those left for HELD_ATTEMPTS. */
export interface HeldSplit {
  readonly listed: HeldAttempt[];
  readonly rest: HeldAttempt[];
}

/** Splits `held` so that `register` with the listed ones fits its frame. */
export function splitHeld(
  register: Omit<WorkerRegister, 'heldAttempts'>,
  held: readonly HeldAttempt[],
): HeldSplit {
  let room = PENDING_MAX_FRAME_BYTES - FRAME_MARGIN_BYTES - JSON.stringify(register).length;
  let count = 0;
  for (const attempt of held) {
    room -= JSON.stringify(attempt).length + 1;
    if (room < 0 || count === MAX_HELD_ATTEMPTS) break;
    count++;
  }
  return { listed: held.slice(0, count), rest: held.slice(count) };
}

/** The HELD_ATTEMPTS parts of `rest` (one empty part when nothing is left), the last with `more: false`. */
export function heldParts(rest: readonly HeldAttempt[]): HeldAttempt[][] {
  const parts: HeldAttempt[][] = [];
  for (let from = 0; from < rest.length; from += MAX_HELD_ATTEMPTS_PER_MESSAGE) {
    parts.push(rest.slice(from, from + MAX_HELD_ATTEMPTS_PER_MESSAGE));
  }
  return parts.length === 0 ? [[]] : parts;
}
