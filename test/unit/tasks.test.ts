/**
 * Unit tests of the built-in task types: known vectors, every payload bound
 * just inside and just outside, error messages, FAIL by attempt, SLEEP
 * cancellation, and the registry built from them.
 */
import { createHash } from 'node:crypto';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { JsonObject, JsonValue } from '../../src/protocol/messages.js';
import {
  BUILTIN_TASK_TYPES,
  createBuiltinRegistry,
  failTask,
  primeCountTask,
  sha256Task,
  sleepTask,
  wordCountTask,
} from '../../src/tasks/builtin/index.js';
import {
  BUILTIN_TASK_LIST,
  TASK_SHORTCUTS,
  builtinPayload,
} from '../../src/protocol/task-types.js';
import { builtinTaskByShortcut } from '../helpers/tasks.js';
import { countPrimesBelow } from '../../src/tasks/builtin/prime-count.js';
import { countWords, isWhitespaceCode } from '../../src/tasks/builtin/word-count.js';
import {
  InvalidPayloadError,
  TaskFailedError,
  TaskRegistry,
  UnknownTaskTypeError,
  type TaskContext,
  type TaskDefinition,
} from '../../src/tasks/registry.js';
import {
  describeReceived,
  requireIntegerField,
  requireStringField,
} from '../../src/tasks/validation.js';

function contextFor(attemptNumber: number, signal = new AbortController().signal): TaskContext {
  return { attemptNumber, signal };
}

/** A payload with `field` set to `value`, or without it when `value` is undefined. */
function payloadWith(field: string, value: JsonValue | undefined): JsonObject {
  return value === undefined ? {} : { [field]: value };
}

/** Asserts that `fn` throws an InvalidPayloadError naming `field`, and returns its message. */
function assertInvalid(fn: () => unknown, field: string): string {
  let message = '';
  assert.throws(fn, (err: unknown) => {
    assert.ok(
      err instanceof InvalidPayloadError,
      `expected InvalidPayloadError, got ${String(err)}`,
    );
    assert.equal(err.code, 'INVALID_PAYLOAD');
    assert.match(err.message, /^Invalid payload: /);
    assert.ok(err.message.includes(field), `message should name ${field}: ${err.message}`);
    message = err.message;
    return true;
  });
  return message;
}

/** Runs a task to its result string, with attempt 1 unless told otherwise. */
function runTask(task: TaskDefinition, payload: JsonObject, attemptNumber = 1): Promise<string> {
  return task.run(payload, contextFor(attemptNumber));
}

describe('validation', () => {
  it('describes what was received when the value is of any kind', () => {
    assert.equal(describeReceived(undefined), 'nothing');
    assert.equal(describeReceived(null), 'null');
    assert.equal(describeReceived('soon'), '"soon"');
    assert.equal(describeReceived(1.5), '1.5');
    assert.equal(describeReceived(true), 'true');
    assert.equal(describeReceived([1, 2]), 'an array');
    assert.equal(describeReceived({ a: 1 }), 'an object');
    assert.equal(describeReceived('x'.repeat(100)), `"${'x'.repeat(40)}"… (100 characters)`);
  });

  it('returns the integer when it is within the inclusive range', () => {
    const range = { min: 0, max: 10 };
    assert.equal(requireIntegerField({ n: 0 }, 'n', range), 0);
    assert.equal(requireIntegerField({ n: 10 }, 'n', range), 10);
  });

  it('rejects with the exact message when an integer field is not an integer', () => {
    const range = { min: 0, max: 600000 };
    const cases: [JsonValue | undefined, string][] = [
      ['soon', '"soon"'],
      [undefined, 'nothing'],
      [null, 'null'],
      [1.5, '1.5'],
      [true, 'true'],
      ['5', '"5"'],
      [[5], 'an array'],
      [{ value: 5 }, 'an object'],
    ];
    for (const [value, shown] of cases) {
      const message = assertInvalid(
        () => requireIntegerField(payloadWith('durationMillis', value), 'durationMillis', range),
        'durationMillis',
      );
      assert.equal(
        message,
        `Invalid payload: durationMillis must be an integer in 0..600000, got ${shown}`,
      );
    }
  });

  it('rejects when a string field is not a string or too long', () => {
    assert.equal(requireStringField({ s: 'abc' }, 's', 3), 'abc');
    for (const value of [5, null, undefined, false, ['a'], { a: 'b' }]) {
      assertInvalid(() => requireStringField(payloadWith('s', value), 's', 3), 's');
    }
    const message = assertInvalid(() => requireStringField({ s: 'abcd' }, 's', 3), 's');
    assert.equal(
      message,
      'Invalid payload: s must be a string of at most 3 characters, got one of 4 characters',
    );
  });

  it('ignores inherited properties when the field is missing', () => {
    assertInvalid(() => requireStringField({}, 'constructor', 100), 'constructor');
  });

  it('rejects when the payload itself is not an object', () => {
    const notObject = [1, 2] as unknown as JsonObject;
    assertInvalid(() => requireIntegerField(notObject, 'limit', { min: 2, max: 3 }), 'payload');
  });
});

describe('SLEEP', () => {
  it('accepts durations when they are at the bounds 0 and 600000', () => {
    sleepTask.validate({ durationMillis: 0 });
    sleepTask.validate({ durationMillis: 600000 });
  });

  it('rejects durations when they are outside 0..600000 or not integers', () => {
    for (const value of [-1, 600001, 'soon', undefined, null, 1.5, '100', true]) {
      assertInvalid(
        () => sleepTask.validate(payloadWith('durationMillis', value)),
        'durationMillis',
      );
    }
  });

  it('resolves "slept <n> ms" when the wait ends', async () => {
    assert.equal(await runTask(sleepTask, { durationMillis: 0 }), 'slept 0 ms');
    assert.equal(await runTask(sleepTask, { durationMillis: 5 }), 'slept 5 ms');
  });

  it('rejects promptly with "cancelled" when the signal aborts', { timeout: 5_000 }, async () => {
    const controller = new AbortController();
    const running = sleepTask.run({ durationMillis: 600000 }, contextFor(1, controller.signal));
    const reason = new Error('job cancelled by client');
    controller.abort(reason);
    await assert.rejects(running, (err: unknown) => {
      assert.ok(err instanceof TaskFailedError);
      assert.equal(err.message, 'cancelled');
      assert.equal(err.cause, reason);
      return true;
    });
  });

  it(
    'rejects at once when the signal was aborted before the start',
    { timeout: 5_000 },
    async () => {
      const controller = new AbortController();
      controller.abort();
      await assert.rejects(
        sleepTask.run({ durationMillis: 600000 }, contextFor(1, controller.signal)),
        TaskFailedError,
      );
    },
  );

  it('rejects instead of running when the payload is invalid', async () => {
    await assert.rejects(runTask(sleepTask, { durationMillis: -1 }), InvalidPayloadError);
  });
});

describe('WORD_COUNT', () => {
  it('counts whitespace-separated words when given the known vectors', async () => {
    assert.equal(await runTask(wordCountTask, { text: 'one  two\tthree\nfour' }), '4');
    assert.equal(await runTask(wordCountTask, { text: '   ' }), '0');
    assert.equal(await runTask(wordCountTask, { text: '' }), '0');
    assert.equal(await runTask(wordCountTask, { text: 'two words' }), '2');
    assert.equal(await runTask(wordCountTask, { text: ' lead and trail \r\n' }), '3');
    assert.equal(await runTask(wordCountTask, { text: 'über\u00a0straße\u3000日本' }), '3');
  });

  it('treats exactly the characters of \\s as whitespace when scanning any code unit', () => {
    for (let code = 0; code <= 0xffff; code++) {
      const expected = /\s/.test(String.fromCharCode(code));
      assert.equal(isWhitespaceCode(code), expected, `code unit ${code.toString(16)}`);
    }
  });

  it('agrees with a regular expression count when the text is the longest allowed', () => {
    const text = 'ab c\td\n\n e  '.repeat(20_000).slice(0, 200_000);
    assert.equal(countWords(text), text.match(/\S+/g)?.length ?? 0);
  });

  it('accepts 200000 characters and rejects 200001 when checking length', () => {
    wordCountTask.validate({ text: 'b'.repeat(200_000) });
    assertInvalid(() => wordCountTask.validate({ text: 'b'.repeat(200_001) }), 'text');
  });

  it('rejects the text when it is not a string, null or missing', () => {
    for (const value of [5, null, undefined, true, ['a']]) {
      assertInvalid(() => wordCountTask.validate(payloadWith('text', value)), 'text');
    }
  });
});

describe('SHA256', () => {
  it('hashes the UTF-8 bytes when given the known vector "abc"', async () => {
    assert.equal(
      await runTask(sha256Task, { text: 'abc' }),
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
    assert.equal(
      await runTask(sha256Task, { text: '' }),
      'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    );
  });

  it('hashes multi-byte characters as UTF-8 when the text is 200000 "€"', async () => {
    const text = '€'.repeat(200_000);
    const expected = createHash('sha256').update(Buffer.from(text, 'utf8')).digest('hex');
    assert.equal(Buffer.byteLength(text, 'utf8'), 600_000);
    assert.equal(await runTask(sha256Task, { text }), expected);
  });

  it('accepts 200000 characters and rejects 200001 when checking length', () => {
    sha256Task.validate({ text: 'a'.repeat(200_000) });
    assertInvalid(() => sha256Task.validate({ text: 'a'.repeat(200_001) }), 'text');
  });

  it('rejects the text when it is not a string, null or missing', () => {
    for (const value of [5, null, undefined, { a: 'b' }]) {
      assertInvalid(() => sha256Task.validate(payloadWith('text', value)), 'text');
    }
  });

  it('rejects instead of running when the payload is invalid', async () => {
    await assert.rejects(runTask(sha256Task, { text: 5 }), InvalidPayloadError);
  });
});

describe('PRIME_COUNT', () => {
  it('counts primes strictly below the limit when given the known vectors', async () => {
    assert.equal(await runTask(primeCountTask, { limit: 10 }), '4');
    assert.equal(await runTask(primeCountTask, { limit: 100 }), '25');
    assert.equal(await runTask(primeCountTask, { limit: 1_000_000 }), '78498');
  });

  it('counts 3001134 primes when the limit is the maximum 50000000', async () => {
    assert.equal(await runTask(primeCountTask, { limit: 50_000_000 }), '3001134');
  });

  it('matches trial division when the limit is small', () => {
    const isPrime = (n: number): boolean => {
      if (n < 2) return false;
      for (let d = 2; d * d <= n; d++) if (n % d === 0) return false;
      return true;
    };
    let expected = 0;
    for (let limit = 2; limit <= 2_000; limit++) {
      if (isPrime(limit - 1)) expected++;
      assert.equal(countPrimesBelow(limit), expected, `limit ${limit}`);
    }
  });

  it('accepts limits when they are at the bounds 2 and 50000000', async () => {
    primeCountTask.validate({ limit: 2 });
    primeCountTask.validate({ limit: 50_000_000 });
    assert.equal(await runTask(primeCountTask, { limit: 2 }), '0');
    assert.equal(await runTask(primeCountTask, { limit: 3 }), '1');
  });

  it('rejects limits when they are outside 2..50000000 or not integers', () => {
    for (const value of [1, 50_000_001, 0, -5, 10.5, '10', null, undefined]) {
      assertInvalid(() => primeCountTask.validate(payloadWith('limit', value)), 'limit');
    }
  });

  it('rejects without sieving when the signal was aborted before the start', async () => {
    const controller = new AbortController();
    controller.abort(new Error('cancelled early'));
    await assert.rejects(
      primeCountTask.run({ limit: 50_000_000 }, contextFor(1, controller.signal)),
      /cancelled early/,
    );
  });
});

describe('FAIL', () => {
  it('accepts failUntilAttempt when it is at the bounds 0 and 1000', () => {
    failTask.validate({ failUntilAttempt: 0 });
    failTask.validate({ failUntilAttempt: 1000 });
  });

  it('rejects failUntilAttempt when it is outside 0..1000 or not an integer', () => {
    for (const value of [-1, 1001, 2.5, 'three', null, undefined]) {
      assertInvalid(
        () => failTask.validate(payloadWith('failUntilAttempt', value)),
        'failUntilAttempt',
      );
    }
  });

  it('fails deliberately when the attempt is below failUntilAttempt', async () => {
    for (const attempt of [1, 2]) {
      await assert.rejects(runTask(failTask, { failUntilAttempt: 3 }, attempt), (err: unknown) => {
        assert.ok(err instanceof TaskFailedError);
        assert.equal(err.code, 'TASK_FAILED');
        assert.equal(err.message, `deliberate failure on attempt ${attempt}`);
        return true;
      });
    }
  });

  it('succeeds when the attempt reaches failUntilAttempt', async () => {
    assert.equal(await runTask(failTask, { failUntilAttempt: 3 }, 3), 'succeeded on attempt 3');
    assert.equal(await runTask(failTask, { failUntilAttempt: 3 }, 4), 'succeeded on attempt 4');
    assert.equal(await runTask(failTask, { failUntilAttempt: 0 }, 1), 'succeeded on attempt 1');
    assert.equal(await runTask(failTask, { failUntilAttempt: 1 }, 1), 'succeeded on attempt 1');
  });

  it('rejects instead of running when the payload is invalid', async () => {
    await assert.rejects(runTask(failTask, { failUntilAttempt: 1001 }), InvalidPayloadError);
  });
});

describe('builtin registry', () => {
  it('lists the five task types in order when created', () => {
    assert.deepEqual(createBuiltinRegistry().taskTypes, [...BUILTIN_TASK_TYPES]);
    assert.deepEqual(BUILTIN_TASK_TYPES, ['SLEEP', 'WORD_COUNT', 'SHA256', 'PRIME_COUNT', 'FAIL']);
  });

  it('returns each definition under its own name when asked for a known type', () => {
    const registry = createBuiltinRegistry();
    for (const taskType of BUILTIN_TASK_TYPES) {
      assert.equal(registry.require(taskType).taskType, taskType);
    }
  });

  it('throws UNKNOWN_TASK_TYPE when the type is not registered', () => {
    const registry = createBuiltinRegistry();
    assert.equal(registry.get('COMPILE'), undefined);
    for (const lookup of [
      () => registry.require('COMPILE'),
      () => registry.validate('sleep', { durationMillis: 1 }),
    ]) {
      assert.throws(lookup, (err: unknown) => {
        assert.ok(err instanceof UnknownTaskTypeError);
        assert.equal(err.code, 'UNKNOWN_TASK_TYPE');
        return true;
      });
    }
  });

  it('validates through the definition when the type is known', () => {
    const registry = createBuiltinRegistry();
    registry.validate('PRIME_COUNT', { limit: 10 });
    assertInvalid(() => registry.validate('PRIME_COUNT', { limit: 1 }), 'limit');
  });

  it('throws when the same type is registered twice', () => {
    assert.throws(() => createBuiltinRegistry().register(sleepTask), /already registered/);
    assert.throws(() => new TaskRegistry().register(failTask).register(failTask));
  });

  it('creates independent registries when called twice', () => {
    const extra: TaskDefinition = {
      taskType: 'ECHO',
      validate: () => undefined,
      run: (payload) => Promise.resolve(JSON.stringify(payload)),
    };
    const first = createBuiltinRegistry().register(extra);
    assert.ok(first.taskTypes.includes('ECHO'));
    assert.ok(!createBuiltinRegistry().taskTypes.includes('ECHO'));
  });
});

describe('the table of built-in tasks', () => {
  it('has one entry per built-in, under its own name, with a unique shortcut', () => {
    assert.deepEqual(
      BUILTIN_TASK_LIST.map((task) => task.taskType),
      [...BUILTIN_TASK_TYPES],
    );
    assert.deepEqual(TASK_SHORTCUTS, ['sleep', 'word-count', 'sha256', 'prime-count', 'fail']);
    for (const task of BUILTIN_TASK_LIST) {
      assert.equal(builtinTaskByShortcut(task.shortcut), task);
    }
    assert.equal(builtinTaskByShortcut('SHA256'), undefined);
  });

  it('drives the registry: the bounds of the table are the bounds that are enforced', () => {
    const registry = createBuiltinRegistry();
    for (const task of BUILTIN_TASK_LIST) {
      const { field } = task;
      if (field.kind === 'integer') {
        registry.validate(task.taskType, builtinPayload(task, field.min));
        registry.validate(task.taskType, builtinPayload(task, field.max));
        assertInvalid(
          () => registry.validate(task.taskType, builtinPayload(task, field.max + 1)),
          field.name,
        );
        assertInvalid(
          () => registry.validate(task.taskType, builtinPayload(task, field.min - 1)),
          field.name,
        );
      } else {
        registry.validate(task.taskType, builtinPayload(task, 'x'.repeat(field.maxChars)));
        assertInvalid(
          () =>
            registry.validate(task.taskType, builtinPayload(task, 'x'.repeat(field.maxChars + 1))),
          field.name,
        );
      }
    }
  });
});
