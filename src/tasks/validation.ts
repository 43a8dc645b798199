/**
 * Payload field readers shared by the built-in tasks.
 *
 * Each reader returns the field's value when it is acceptable and otherwise
 * throws {@link InvalidPayloadError} whose message names the field and shows
 * what was received, e.g.
 * `Invalid payload: durationMillis must be an integer in 0..600000, got "soon"`.
 * They run on the coordinator before a job exists, so they stay cheap: no
 * value is ever serialized in full.
 */
import type { JsonObject, JsonValue } from '../protocol/messages.js';
import { InvalidPayloadError } from './registry.js';

/** Longest excerpt of a received string shown in an error message, in characters. */
const EXCERPT_MAX_CHARS = 40;

/** An inclusive range of acceptable integers. */
export interface IntegerRange {
  readonly min: number;
  readonly max: number;
}

/**
 * A short, human description of a received value for error messages:
 * `nothing` when the field is missing, JSON for scalars (strings cut to
 * {@link EXCERPT_MAX_CHARS}), and only the kind for arrays and objects.
 */
export function describeReceived(value: JsonValue | undefined): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  if (typeof value !== 'string') return String(value);
  if (value.length <= EXCERPT_MAX_CHARS) return JSON.stringify(value);
  return `${JSON.stringify(value.slice(0, EXCERPT_MAX_CHARS))}… (${value.length} characters)`;
}

/** The payload's own property `field`, or `undefined` when it is absent. */
function readField(payload: JsonObject, field: string): JsonValue | undefined {
  // Payloads come off the wire; guard against a non-object slipping through
  // and never look at inherited properties.
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    throw new InvalidPayloadError(
      `payload must be a JSON object, got ${describeReceived(payload as JsonValue)}`,
    );
  }
  return Object.hasOwn(payload, field) ? payload[field] : undefined;
}

/**
 * Reads a required integer field within `range` (inclusive). Rejects
 * fractions, strings, booleans, `null` and a missing field.
 */
export function requireIntegerField(
  payload: JsonObject,
  field: string,
  range: IntegerRange,
): number {
  const value = readField(payload, field);
  if (
    typeof value !== 'number' ||
    !Number.isInteger(value) ||
    value < range.min ||
    value > range.max
  ) {
    throw new InvalidPayloadError(
      `${field} must be an integer in ${range.min}..${range.max}, got ${describeReceived(value)}`,
    );
  }
  return value;
}

/**
 * Reads a required string field of at most `maxLengthChars` UTF-16 code units
 * (JavaScript `.length`). Rejects numbers, `null`, other kinds and a missing
 * field.
 */
export function requireStringField(
  payload: JsonObject,
  field: string,
  maxLengthChars: number,
): string {
  const value = readField(payload, field);
  const expected = `${field} must be a string of at most ${maxLengthChars} characters`;
  if (typeof value !== 'string') {
    throw new InvalidPayloadError(`${expected}, got ${describeReceived(value)}`);
  }
  if (value.length > maxLengthChars) {
    // The value itself could be huge; its length is what matters here.
    throw new InvalidPayloadError(`${expected}, got one of ${value.length} characters`);
  }
  return value;
}
