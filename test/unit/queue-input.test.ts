/**
 * How a queue rate is read and refused: `n/<duration>` text (CLI, HTTP API)
 * and `{max, intervalMillis}` objects (client library), each refusal naming
 * the accepted forms instead of a value it could not read.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setQueueMessage } from '../../src/client/queues.js';
import type { RateLimit } from '../../src/protocol/messages.js';
import { parseRate, rateProblem } from '../../src/protocol/queue-names.js';

function errorOf(text: string): string {
  const parsed = parseRate(text);
  assert.ok('error' in parsed, `${text} was accepted`);
  return parsed.error;
}

describe('parseRate', () => {
  it('reads a count, a slash and a duration in ms, s, m, h or d (bare = ms)', () => {
    assert.deepEqual(parseRate('10/1s'), { rate: { max: 10, intervalMillis: 1_000 } });
    assert.deepEqual(parseRate(' 200/500ms '), { rate: { max: 200, intervalMillis: 500 } });
    assert.deepEqual(parseRate('5/2m'), { rate: { max: 5, intervalMillis: 120_000 } });
    assert.deepEqual(parseRate('1000/1h'), { rate: { max: 1000, intervalMillis: 3_600_000 } });
    assert.deepEqual(parseRate('7/250'), { rate: { max: 7, intervalMillis: 250 } });
  });

  it('names a wrong unit and the units it takes', () => {
    for (const [text, unit] of [
      ['10/1sec', 'sec'],
      ['10/1min', 'min'],
      ['10/1x', 'x'],
      ['10/1S', 'S'],
    ] as const) {
      const error = errorOf(text);
      assert.match(error, new RegExp(`unknown unit "${unit}"`));
      assert.match(error, /ms, s, m \(minutes\), h or d/);
      assert.doesNotMatch(error, /undefined/);
    }
  });

  it('shows the accepted forms for text that is not a rate at all', () => {
    for (const text of ['10', '10/s', 'ten/1s', '10 per second', '10/1.5s', '']) {
      const error = errorOf(text);
      assert.match(error, /n\/<duration>.*10\/1s, 200\/500ms, 1000\/1h/);
      assert.doesNotMatch(error, /undefined/);
    }
  });

  it('names the bound a well-formed rate passes', () => {
    assert.match(
      errorOf('10/2d'),
      /interval must be 1 ms\.\.1 d, got 172800000 ms \(in "10\/2d"\)/,
    );
    assert.match(errorOf('0/1s'), /count must be an integer 1\.\.1000000, got 0/);
  });
});

describe('rateProblem of a rate object (client library)', () => {
  it('names the missing or misspelt field and the shape of a rate', () => {
    const misspelt = { max: 10, interval: 1_000 } as unknown as RateLimit;
    const problem = rateProblem(misspelt) ?? '';
    assert.match(problem, /intervalMillis must be a number, got nothing/);
    assert.match(problem, /\{max: n, intervalMillis: ms\}/);
    assert.doesNotMatch(problem, /undefined/);
    assert.match(rateProblem('10/1s' as unknown as RateLimit) ?? '', /must be \{max: n/);
    assert.equal(rateProblem({ max: 10, intervalMillis: 1_000 }), null);
  });

  it('makes setQueueMessage throw a TypeError that says so', () => {
    assert.throws(
      () => setQueueMessage('q', { rateLimit: { max: 10, intervalMs: 1_000 } as never }),
      (err: unknown) =>
        err instanceof TypeError && /rateLimit intervalMillis must be/.test(err.message),
    );
  });
});
