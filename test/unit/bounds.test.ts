import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { boundProblem, relationProblem, tableProblem } from '../../src/common/bounds.js';
import {
  COORDINATOR_RELATIONS,
  DEFAULT_COORDINATOR_OPTIONS,
  coordinatorOptionsProblem,
  type CoordinatorOptions,
} from '../../src/coordinator/options.js';
import { WORKER_BOUNDS, workerOptionsProblem } from '../../src/worker/options.js';
import { silentLogger } from '../helpers/logger.js';

const noOther = () => ({ name: '?', value: undefined });

function coordinator(overrides: Partial<CoordinatorOptions>): CoordinatorOptions {
  return { ...DEFAULT_COORDINATOR_OPTIONS, logger: silentLogger(), ...overrides };
}

describe('bounds tables', () => {
  it('names the value, the range and what was given when a bound is broken', () => {
    const bound = { min: 1, max: 10 };
    assert.equal(boundProblem('n', 5, bound, noOther), null);
    assert.equal(boundProblem('n', 11, bound, noOther), 'n must be an integer in 1..10, got 11');
    assert.equal(boundProblem('n', '3', bound, noOther), 'n must be an integer in 1..10, got "3"');
    assert.equal(boundProblem('n', 1.5, bound, noOther), 'n must be an integer in 1..10, got 1.5');
    assert.match(boundProblem('n', undefined, bound, noOther) ?? '', /got undefined/);
    assert.equal(boundProblem('n', undefined, { ...bound, optional: true }, noOther), null);
    assert.equal(boundProblem('n', null, { ...bound, nullMeans: 'off' }, noOther), null);
    assert.equal(
      boundProblem('n', -1, { ...bound, nullMeans: 'off' }, noOther),
      'n must be null (off) or an integer in 1..10, got -1',
    );
  });

  it('checks a bound relative to another option with the names the caller gives', () => {
    const options = { coordinatorHost: 'h', workerId: 'w', coordinatorPort: 1 };
    const worker = { ...options, capacity: 2, heartbeatIntervalMs: 1, reconnectDelayMs: 1 };
    assert.equal(workerOptionsProblem({ ...worker, prefetch: 8 }), null);
    assert.equal(
      workerOptionsProblem({ ...worker, prefetch: 9 }),
      'prefetch must be an integer in 0..4 x capacity (8), got 9',
    );
    const flag = (key: string) => `--${key}`;
    assert.equal(
      tableProblem({ ...worker, prefetch: 9 }, WORKER_BOUNDS, flag, 'atMost'),
      '--prefetch must be at most 4 x --capacity (8), got 9',
    );
  });

  it('checks the coordinator options, its net limits and the rules between them', () => {
    assert.equal(coordinatorOptionsProblem(coordinator({})), null);
    assert.equal(
      coordinatorOptionsProblem(coordinator({ maxActiveJobs: 0 })),
      'maxActiveJobs must be an integer in 1..100000000, got 0',
    );
    assert.equal(
      coordinatorOptionsProblem(coordinator({ netLimits: { maxConnections: 0 } })),
      'netLimits.maxConnections must be an integer in 1..1000000, got 0',
    );
    const lease = coordinator({ leaseTtlMs: 1_000, leaseRenewIntervalMs: 600 });
    assert.equal(
      coordinatorOptionsProblem(lease),
      'leaseRenewIntervalMs (600) must be at most half of leaseTtlMs (1000)',
    );
    assert.equal(
      relationProblem(lease, COORDINATOR_RELATIONS, (key) => `--${key}`),
      '--leaseRenewIntervalMs (600) must be at most half of --leaseTtlMs (1000)',
    );
  });
});
