import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  PROGRAM_NAME_VARIABLE,
  programNameOf,
  takeProgramName,
} from '../../src/cli/program-name.js';

describe('programNameOf', () => {
  const cwd = '/home/u/dtp';

  it('uses the name a wrapper gave when there is one', () => {
    const env = { [PROGRAM_NAME_VARIABLE]: 'dtp-coordinator' };
    const script = '/x/node_modules/dtp/dist/src/cli/coordinator-main.js';
    assert.equal(programNameOf({ env, script, cwd }, 'coordinator.sh'), 'dtp-coordinator');
  });

  it('says node and the path below the working directory when node ran the file itself', () => {
    const script = '/home/u/dtp/dist/src/cli/client-main.js';
    assert.equal(
      programNameOf({ env: {}, script, cwd }, 'client.sh'),
      'node dist/src/cli/client-main.js',
    );
    const blank = { [PROGRAM_NAME_VARIABLE]: '  ' };
    assert.equal(
      programNameOf({ env: blank, script, cwd }, 'client.sh'),
      'node dist/src/cli/client-main.js',
    );
  });

  it('keeps an absolute path outside the working directory, and falls back without a script', () => {
    const script = '/opt/dtp/dist/src/cli/worker-main.js';
    assert.equal(programNameOf({ env: {}, script, cwd }, 'worker.sh'), `node ${script}`);
    assert.equal(programNameOf({ env: {}, script: undefined, cwd }, 'worker.sh'), 'worker.sh');
  });
});

describe('takeProgramName', () => {
  it('reads the variable once and takes it out of the environment', () => {
    process.env[PROGRAM_NAME_VARIABLE] = 'dtp-worker';
    assert.equal(takeProgramName('worker.sh'), 'dtp-worker');
    assert.equal(process.env[PROGRAM_NAME_VARIABLE], undefined);
  });
});
