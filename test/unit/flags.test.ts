import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  UsageError,
  envVarName,
  formatFlagHelp,
  parseFlags,
  scanPositionals,
} from '../../src/cli/flags.js';
import type { FlagSpec } from '../../src/cli/flags.js';
import { PRIORITIES } from '../../src/protocol/messages.js';

const SPECS: readonly FlagSpec[] = [
  { name: 'worker-port', type: 'int', min: 0, max: 65_535, default: 7070, help: 'worker port' },
  { name: 'capacity', type: 'int', min: 1, max: 1024, default: 4, help: 'tasks at once' },
  { name: 'bind-host', type: 'string', default: '0.0.0.0', placeholder: 'host', help: 'bind' },
  { name: 'priority', type: 'enum', values: PRIORITIES, help: 'priority' },
  { name: 'text', type: 'string', help: 'text' },
  { name: 'json', type: 'boolean', help: 'json output' },
];

const REQUIRED: readonly FlagSpec[] = [
  { name: 'milliseconds', type: 'int', min: 0, max: 600_000, required: true, help: 'ms' },
];

function usageMessage(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof UsageError, `expected a UsageError, got ${String(err)}`);
    assert.equal(err.code, 'USAGE');
    return err.message;
  }
  assert.fail('expected a UsageError');
}

describe('flags', () => {
  it('uses defaults when neither flag nor environment gives a value', () => {
    const { values, help } = parseFlags([], SPECS, { env: {} });
    assert.equal(help, false);
    assert.equal(values.int('worker-port'), 7070);
    assert.equal(values.string('bind-host'), '0.0.0.0');
    assert.equal(values.optionalString('text'), undefined);
    assert.equal(values.optionalEnum('priority', PRIORITIES), undefined);
    assert.equal(values.bool('json'), false);
  });

  it('reads DTP_<NAME> when the flag is absent', () => {
    assert.equal(envVarName('worker-port'), 'DTP_WORKER_PORT');
    const env = { DTP_WORKER_PORT: '9000', DTP_BIND_HOST: '127.0.0.1', DTP_JSON: 'true' };
    const { values } = parseFlags([], SPECS, { env });
    assert.equal(values.int('worker-port'), 9000);
    assert.equal(values.string('bind-host'), '127.0.0.1');
    assert.equal(values.bool('json'), true);
  });

  it('lets an explicit flag win over the environment', () => {
    const env = { DTP_WORKER_PORT: '9000', DTP_CAPACITY: 'not a number' };
    const { values } = parseFlags(['--worker-port', '9100', '--capacity', '2'], SPECS, { env });
    assert.equal(values.int('worker-port'), 9100);
    assert.equal(values.int('capacity'), 2);
  });

  it('treats an empty environment variable as unset', () => {
    const { values } = parseFlags([], SPECS, { env: { DTP_WORKER_PORT: '' } });
    assert.equal(values.int('worker-port'), 7070);
  });

  it('names the environment variable when its value is bad', () => {
    const message = usageMessage(() => parseFlags([], SPECS, { env: { DTP_CAPACITY: '0' } }));
    assert.match(message, /DTP_CAPACITY must be an integer in 1\.\.1024, got "0"/);
  });

  it('accepts integers at both ends of the range and rejects just outside', () => {
    assert.equal(parseFlags(['--capacity', '1'], SPECS, { env: {} }).values.int('capacity'), 1);
    assert.equal(parseFlags(['--capacity=1024'], SPECS, { env: {} }).values.int('capacity'), 1024);
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
      const message = usageMessage(() => parseFlags([`--capacity=${bad}`], SPECS, { env: {} }));
      assert.match(message, /--capacity must be an integer in 1\.\.1024/);
    }
  });

  it('matches enums case-insensitively and returns the canonical spelling', () => {
    for (const given of ['high', 'HIGH', 'High']) {
      const { values } = parseFlags(['--priority', given], SPECS, { env: {} });
      assert.equal(values.enum('priority', PRIORITIES), 'HIGH');
    }
    const message = usageMessage(() => parseFlags(['--priority', 'urgent'], SPECS, { env: {} }));
    assert.match(message, /--priority must be one of HIGH, NORMAL, LOW, got "urgent"/);
  });

  it('rejects an unknown flag with a UsageError', () => {
    const message = usageMessage(() => parseFlags(['--distance', '3'], SPECS, { env: {} }));
    assert.match(message, /--distance/);
  });

  it('rejects a flag without its value and an unexpected positional', () => {
    usageMessage(() => parseFlags(['--capacity'], SPECS, { env: {} }));
    const message = usageMessage(() => parseFlags(['extra'], SPECS, { env: {} }));
    assert.match(message, /unexpected argument "extra"/);
    const ok = parseFlags(['job-1', '--capacity', '3'], SPECS, { env: {}, maxPositionals: 1 });
    assert.deepEqual(ok.positionals, ['job-1']);
  });

  it('reports a missing required flag, from flag or environment', () => {
    assert.match(
      usageMessage(() => parseFlags([], REQUIRED, { env: {} })),
      /missing --milliseconds/,
    );
    const fromEnv = parseFlags([], REQUIRED, { env: { DTP_MILLISECONDS: '50' } });
    assert.equal(fromEnv.values.int('milliseconds'), 50);
  });

  it('reports --help without validating the rest', () => {
    for (const flag of ['--help', '-h']) {
      const parsed = parseFlags([flag], REQUIRED, { env: { DTP_MILLISECONDS: '' } });
      assert.equal(parsed.help, true);
    }
  });

  it('generates help text from the table', () => {
    const text = formatFlagHelp(SPECS);
    const lines = text.split('\n');
    assert.equal(lines.length, SPECS.length);
    assert.match(
      text,
      /--worker-port <0\.\.65535>\s+worker port \(default 7070, env DTP_WORKER_PORT\)/,
    );
    assert.match(text, /--priority <HIGH\|NORMAL\|LOW>/);
    assert.match(text, /--json\s+json output \(env DTP_JSON\)/);
    const column = lines.map((line) => line.indexOf(line.trim().split(/\s{2,}/)[1] ?? ''));
    assert.equal(new Set(column).size, 1, 'help texts start in one column');
  });

  it('finds positionals leniently, before the command flags are known', () => {
    const argv = ['--port', '7071', 'submit', 'teleport', '--distance', '3'];
    const positionals = scanPositionals(argv, [
      { name: 'port', type: 'int', min: 1, max: 65_535, help: 'port' },
    ]);
    assert.deepEqual(positionals.slice(0, 2), ['submit', 'teleport']);
  });
});
