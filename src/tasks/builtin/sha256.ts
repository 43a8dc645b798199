/**
 * `SHA256 {"text": s}`, s at most 200000 characters: the lowercase hex
 * SHA-256 digest of the text's UTF-8 bytes.
 */
import { createHash } from 'node:crypto';
import type { JsonObject } from '../../protocol/messages.js';
import { BUILTIN_TASKS } from '../../protocol/task-types.js';
import type { TaskDefinition } from '../registry.js';
import { requireStringField } from '../validation.js';

/** Longest accepted text, in UTF-16 code units (JavaScript `.length`). */
export const SHA256_MAX_CHARS = BUILTIN_TASKS.SHA256.field.maxChars;

function readText(payload: JsonObject): string {
  return requireStringField(payload, BUILTIN_TASKS.SHA256.field.name, SHA256_MAX_CHARS);
}

/** Lowercase hex SHA-256 of `text` encoded as UTF-8. */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

export const sha256Task: TaskDefinition = {
  taskType: 'SHA256',
  validate(payload) {
    readText(payload);
  },
  run(payload) {
    // The executor turns a failed re-validation into a rejection, not a throw.
    return new Promise((resolve) => resolve(sha256Hex(readText(payload))));
  },
};
