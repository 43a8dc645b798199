/**
 * How the simulation reports a broken invariant: one error type carrying the
 * seed, the step and what went wrong, with the command that replays the run.
 */

/** The command that replays one seed step by step. */
export function replayCommand(seed: number, steps?: number): string {
  const stepsFlag = steps === undefined ? '' : ` --steps ${steps}`;
  return `node dist/test/sim/run.js --seed ${seed}${stepsFlag} --verbose`;
}

export class SimulationViolation extends Error {
  readonly seed: number;
  readonly step: number;
  readonly description: string;

  constructor(seed: number, step: number, description: string, replay: string) {
    super(`invariant violated (seed ${seed}, step ${step}): ${description}\n  replay: ${replay}`);
    this.name = 'SimulationViolation';
    this.seed = seed;
    this.step = step;
    this.description = description;
  }
}

/** Knows where the run is, so every check can fail with seed and step. */
export class Judge {
  readonly seed: number;
  /** Main-phase step count of this run (part of the replay command when not the default). */
  readonly replaySteps: number | undefined;
  /** The command that replays this run. */
  readonly replay: string;
  step = 0;
  phase: 'main' | 'quiescence' = 'main';

  /** @param replay the replay command, when not the core simulation's (run.js). */
  constructor(seed: number, replaySteps?: number, replay?: string) {
    this.seed = seed;
    this.replaySteps = replaySteps;
    this.replay = replay ?? replayCommand(seed, replaySteps);
  }

  /** Builds the violation (callers `throw` it, so control flow stays visible). */
  violation(description: string): SimulationViolation {
    return new SimulationViolation(
      this.seed,
      this.step,
      `[${this.phase}] ${description}`,
      this.replay,
    );
  }

  /** Throws a violation unless `ok`. */
  check(ok: boolean, description: () => string): void {
    if (!ok) throw this.violation(description());
  }
}
