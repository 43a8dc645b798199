/**
 * `WORD_COUNT {"text": s}`, s at most 200000 characters: the number of
 * maximal runs of non-whitespace characters, as a decimal string.
 *
 * Whitespace is exactly what JavaScript's `\s` matches (ASCII tab, line feed,
 * vertical tab, form feed, carriage return and space, plus the Unicode space
 * separators, line/paragraph separators and the byte order mark).
 */
import type { JsonObject } from '../../protocol/messages.js';
import { BUILTIN_TASKS } from '../../protocol/task-types.js';
import type { TaskDefinition } from '../registry.js';
import { requireStringField } from '../validation.js';

/** Longest accepted text, in UTF-16 code units (JavaScript `.length`). */
export const WORD_COUNT_MAX_CHARS = BUILTIN_TASKS.WORD_COUNT.field.maxChars;

function readText(payload: JsonObject): string {
  return requireStringField(payload, BUILTIN_TASKS.WORD_COUNT.field.name, WORD_COUNT_MAX_CHARS);
}

/** True for the UTF-16 code units that `\s` matches (all are single units). */
export function isWhitespaceCode(code: number): boolean {
  if (code <= 0x20) return code === 0x20 || (code >= 0x09 && code <= 0x0d);
  if (code < 0xa0) return false;
  return (
    code === 0xa0 ||
    code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000 ||
    code === 0xfeff
  );
}

/** Counts words in one pass without allocating the words themselves. */
export function countWords(text: string): number {
  let words = 0;
  let inWord = false;
  for (let i = 0; i < text.length; i++) {
    const space = isWhitespaceCode(text.charCodeAt(i));
    if (!space && !inWord) words++;
    inWord = !space;
  }
  return words;
}

export const wordCountTask: TaskDefinition = {
  taskType: 'WORD_COUNT',
  validate(payload) {
    readText(payload);
  },
  run(payload) {
    // The executor turns a failed re-validation into a rejection, not a throw.
    return new Promise((resolve) => resolve(String(countWords(readText(payload)))));
  },
};
