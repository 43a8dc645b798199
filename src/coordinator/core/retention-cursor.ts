/**
 * Where background retention (retention.ts) stands, kept in the core's
 * state: which terminal state it deletes next and when it may step again.
 */
import { TERMINAL_STATES, type TerminalState } from '../../protocol/messages.js';

/**
 * Retention's own state. At most one background step is out at a time. A
 * full step is followed at once by another on the same state; a short one
 * moves to the next state; a round of three short steps rests.
 */
export class RetentionCursor {
  #index = 0;
  #shortInRow = 0;
  nextStepAtMs = 0;
  running = false;

  /** The terminal state the next background step deletes. */
  get state(): TerminalState {
    return TERMINAL_STATES[this.#index % TERMINAL_STATES.length] as TerminalState;
  }

  /** Records a step's outcome; returns true when the next step should wait. */
  stepEnded(full: boolean): boolean {
    if (full) {
      this.#shortInRow = 0;
      return false;
    }
    this.#index++;
    this.#shortInRow++;
    if (this.#shortInRow < TERMINAL_STATES.length) return false;
    this.#shortInRow = 0;
    return true;
  }
}
