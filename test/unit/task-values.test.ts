/**
 * What crosses a handler's boundary: its result encoded for TASK_RESULT (and
 * everything JSON cannot carry exactly refused with the place named), and
 * its payload checked by a Standard Schema (zod 4 here) with
 * `Invalid payload: <field> <problem>` messages.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { z } from 'zod';
import { InvalidPayloadError } from '../../src/tasks/registry.js';
import { ResultNotJsonError, encodeResult, validatePayload } from '../../src/worker/task-values.js';

describe('encodeResult', () => {
  it('sends a string as it is and any other JSON value as its JSON text', () => {
    assert.deepEqual(encodeResult('olleh'), { result: 'olleh', resultFormat: 'text' });
    assert.deepEqual(encodeResult(''), { result: '', resultFormat: 'text' });
    for (const value of [0, -1.5, true, false, null, [], {}, [1, 'a', null], { a: { b: [1] } }]) {
      const encoded = encodeResult(value);
      assert.equal(encoded.resultFormat, 'json');
      assert.deepEqual(JSON.parse(encoded.result), value);
    }
    const quoted = encodeResult({ s: 'a "quoted" string' });
    assert.deepEqual(JSON.parse(quoted.result), { s: 'a "quoted" string' });
  });

  it('treats undefined as null and leaves out undefined properties, as JSON does', () => {
    assert.deepEqual(encodeResult(undefined), { result: 'null', resultFormat: 'json' });
    assert.deepEqual(encodeResult({ a: 1, b: undefined }), {
      result: '{"a":1}',
      resultFormat: 'json',
    });
    assert.deepEqual(encodeResult(Object.assign(Object.create(null) as object, { a: 1 })), {
      result: '{"a":1}',
      resultFormat: 'json',
    });
  });

  it('refuses what JSON cannot carry exactly, naming where it is', () => {
    const cycle: Record<string, unknown> = { a: 1 };
    cycle.self = cycle;
    let deep: unknown = 1;
    for (let i = 0; i < 1_001; i++) deep = [deep];
    const cases: [unknown, RegExp][] = [
      [10n, /^the handler's result is not a JSON value: result is a bigint$/],
      [() => 1, /result is a function/],
      [Symbol('s'), /result is a symbol/],
      [{ items: [1, 2, Number.NaN] }, /result\.items\[2\] is NaN/],
      [{ n: Infinity }, /result\.n is Infinity/],
      [[1, undefined], /result\[1\] is undefined/],
      [{ when: new Date(0) }, /result\.when is an instance of Date/],
      [new Map(), /result is an instance of Map/],
      [cycle, /result\.self refers back to itself/],
      [deep, /nested deeper than 1000 levels/],
    ];
    for (const [value, message] of cases) {
      assert.throws(
        () => encodeResult(value),
        (err: unknown) => {
          assert.ok(err instanceof ResultNotJsonError);
          assert.match(err.message, message);
          return true;
        },
      );
    }
  });

  it('accepts the same object twice (shared, not a cycle)', () => {
    const shared = { x: 1 };
    assert.deepEqual(JSON.parse(encodeResult({ a: shared, b: [shared] }).result), {
      a: { x: 1 },
      b: [{ x: 1 }],
    });
  });
});

describe('validatePayload', () => {
  const schema = z.object({
    path: z.string().min(1),
    width: z.number().int().positive(),
    tags: z.array(z.string()).optional(),
    scale: z.number().default(1),
  });

  it("returns the schema's output (defaults and transforms applied)", async () => {
    assert.deepEqual(await validatePayload(schema, { path: 'a.png', width: 10 }), {
      path: 'a.png',
      width: 10,
      scale: 1,
    });
  });

  it('throws a non-retryable Invalid payload naming each field and its problem', async () => {
    await assert.rejects(
      validatePayload(schema, { path: '', width: 1.5, tags: ['a', 7] }),
      (err) => {
        assert.ok(err instanceof InvalidPayloadError);
        assert.equal(err.retryable, false);
        assert.match(err.message, /^Invalid payload: path /);
        assert.match(err.message, /; width /);
        assert.match(err.message, /; tags\[1\] /);
        return true;
      },
    );
    await assert.rejects(validatePayload(z.string(), {}), {
      message: /^Invalid payload: payload /,
    });
  });

  it('shows five issues and counts the rest', async () => {
    const many = z.object(Object.fromEntries('abcdefg'.split('').map((k) => [k, z.string()])));
    await assert.rejects(validatePayload(many, {}), { message: /; and 2 more$/ });
  });

  it('works with a hand-written asynchronous Standard Schema', async () => {
    const even = {
      '~standard': {
        version: 1 as const,
        vendor: 'test',
        validate: (value: unknown) =>
          Promise.resolve(
            typeof value === 'number' && value % 2 === 0
              ? { value }
              : { issues: [{ message: 'must be even', path: [{ key: 'n' }] }] },
          ),
      },
    };
    assert.equal(await validatePayload(even, 4), 4);
    await assert.rejects(validatePayload(even, 3), { message: 'Invalid payload: n must be even' });
  });
});
