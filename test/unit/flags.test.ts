import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { envVarName, splitList } from '../../src/cli/flags.js';
import type { FlagSpec, FlagValues } from '../../src/cli/flags.js';
import { readServerCommandLine } from '../../src/cli/lifecycle.js';
import { PRIORITIES } from '../../src/protocol/messages.js';

const SPECS: readonly FlagSpec[] = [
  { name: 'worker-port', type: 'int', min: 0, max: 65_535, default: 7070, help: 'worker port' },
  { name: 'capacity', type: 'int', min: 1, max: 1024, default: 4, help: 'tasks at once' },
  { name: 'bind-host', type: 'string', default: '0.0.0.0', placeholder: 'host', help: 'bind' },
  { name: 'priority', type: 'enum', values: PRIORITIES, help: 'priority' },
  { name: 'text', type: 'string', help: 'text' },
  { name: 'json', type: 'boolean', help: 'json output' },
  { name: 'tasks', type: 'list', placeholder: 'module', help: 'task modules' },
];

const REQUIRED: readonly FlagSpec[] = [
  { name: 'milliseconds', type: 'int', min: 0, max: 600_000, required: true, help: 'ms' },
];

function parse(
  argv: readonly string[],
  specs: readonly FlagSpec[] = SPECS,
  env: NodeJS.ProcessEnv = {},
): FlagValues {
  const line = readServerCommandLine(argv, 'test.sh', 'A test program.', specs, env);
  assert.equal(line.kind, 'run', JSON.stringify(line));
  return line.values;
}

function usageMessage(
  argv: readonly string[],
  specs: readonly FlagSpec[] = SPECS,
  env: NodeJS.ProcessEnv = {},
): string {
  const line = readServerCommandLine(argv, 'test.sh', 'A test program.', specs, env);
  assert.equal(line.kind, 'usage-error', JSON.stringify(line));
  return line.message;
}

describe('flags', () => {
  it('uses defaults when neither flag nor environment gives a value', () => {
    const values = parse([]);
    assert.equal(values.int('worker-port'), 7070);
    assert.equal(values.string('bind-host'), '0.0.0.0');
    assert.equal(values.optionalString('text'), undefined);
    assert.equal(values.optionalEnum('priority', PRIORITIES), undefined);
    assert.equal(values.bool('json'), false);
    assert.deepEqual(values.strings('tasks'), []);
  });

  it('reads DTP_<NAME> when the flag is absent', () => {
    assert.equal(envVarName('worker-port'), 'DTP_WORKER_PORT');
    const env = { DTP_WORKER_PORT: '9000', DTP_BIND_HOST: '127.0.0.1', DTP_JSON: 'true' };
    const values = parse([], SPECS, env);
    assert.equal(values.int('worker-port'), 9000);
    assert.equal(values.string('bind-host'), '127.0.0.1');
    assert.equal(values.bool('json'), true);
    assert.equal(parse([], SPECS, { DTP_JSON: 'off' }).bool('json'), false);
  });

  it('lets an explicit flag win over the environment', () => {
    const env = { DTP_WORKER_PORT: '9000', DTP_CAPACITY: 'not a number' };
    const values = parse(['--worker-port', '9100', '--capacity', '2'], SPECS, env);
    assert.equal(values.int('worker-port'), 9100);
    assert.equal(values.int('capacity'), 2);
  });

  it('treats an empty environment variable as unset', () => {
    assert.equal(parse([], SPECS, { DTP_WORKER_PORT: '' }).int('worker-port'), 7070);
  });

  it('names the environment variable when its value is bad', () => {
    assert.match(
      usageMessage([], SPECS, { DTP_CAPACITY: '0' }),
      /DTP_CAPACITY must be an integer in 1\.\.1024, got "0"/,
    );
  });

  it('accepts integers at both ends of the range and rejects just outside', () => {
    assert.equal(parse(['--capacity', '1']).int('capacity'), 1);
    assert.equal(parse(['--capacity=1024']).int('capacity'), 1024);
    for (const bad of [
      '0',
      '1025',
      '-1',
      '2.5',
      '1e3',
      '0x10',
      'four',
      ' ',
      '99999999999999999999',
    ]) {
      assert.match(
        usageMessage([`--capacity=${bad}`]),
        /--capacity must be an integer in 1\.\.1024/,
      );
    }
  });

  it('matches enums case-insensitively and returns the canonical spelling', () => {
    for (const given of ['high', 'HIGH', 'High']) {
      assert.equal(parse(['--priority', given]).enum('priority', PRIORITIES), 'HIGH');
    }
    assert.match(
      usageMessage(['--priority', 'urgent']),
      /--priority must be one of HIGH, NORMAL, LOW, got "urgent"/,
    );
  });

  it('rejects an unknown flag and suggests a near one', () => {
    assert.match(usageMessage(['--distance', '3']), /unknown option '--distance'/);
    assert.match(usageMessage(['--capacty', '3']), /Did you mean --capacity\?/);
  });

  it('rejects a flag without its value and an unexpected positional', () => {
    assert.match(usageMessage(['--capacity']), /--capacity/);
    assert.match(usageMessage(['extra']), /too many arguments/);
  });

  it('reports a missing required flag, from flag or environment', () => {
    assert.match(usageMessage([], REQUIRED), /missing --milliseconds/);
    assert.equal(parse([], REQUIRED, { DTP_MILLISECONDS: '50' }).int('milliseconds'), 50);
  });

  it('collects a repeatable flag in order, and a comma-separated list from the environment', () => {
    assert.deepEqual(parse(['--tasks', 'a.js', '--tasks', 'b,c.js']).strings('tasks'), [
      'a.js',
      'b,c.js',
    ]);
    assert.deepEqual(parse([], SPECS, { DTP_TASKS: ' a.js, ,pkg-b ' }).strings('tasks'), [
      'a.js',
      'pkg-b',
    ]);
    assert.deepEqual(
      parse(['--tasks', 'x.js'], SPECS, { DTP_TASKS: 'a.js' }).strings('tasks'),
      ['x.js'],
      'an explicit flag wins over the environment',
    );
    assert.deepEqual(splitList('a,,b ,'), ['a', 'b']);
  });

  it('takes the last value of a flag given twice that is not repeatable', () => {
    assert.equal(parse(['--capacity', '2', '--capacity', '3']).int('capacity'), 3);
  });

  it('prints help generated from the table without validating the rest', () => {
    for (const flag of ['--help', '-h']) {
      const line = readServerCommandLine([flag], 'test.sh', 'A test program.', REQUIRED, {});
      assert.equal(line.kind, 'help');
    }
    const line = readServerCommandLine(['--help'], 'test.sh', 'A test program.', SPECS, {});
    assert.equal(line.kind, 'help');
    const text = line.kind === 'help' ? line.text : '';
    assert.match(text, /Usage: test\.sh/);
    assert.match(text, /A test program\./);
    assert.match(
      text,
      /--worker-port <0\.\.65535>\s+worker port \(default 7070, env DTP_WORKER_PORT\)/,
    );
    assert.match(text, /--priority <HIGH\|NORMAL\|LOW>/);
    assert.match(text, /--json\s+json output \(env DTP_JSON\)/);
    assert.match(
      text,
      /--tasks <module>\s+task modules \(repeatable, env DTP_TASKS, comma-separated\)/,
    );
  });
});
