/** Looking at the coordinator's event log from outside. */
import type { Logger } from 'pino';
import type { CoreEvent } from '../../src/coordinator/core/types.js';
import { logEvent } from '../../src/coordinator/observability/event-log.js';

/**
 * Whether the event log skips `event` without formatting it when `info` is
 * off: the logger it is handed with info off is never called.
 */
export function isInfoOnly(event: CoreEvent): boolean {
  let called = false;
  const record = (): void => {
    called = true;
  };
  const infoOff = {
    isLevelEnabled: (level: string) => level !== 'info' && level !== 'debug',
    info: record,
    warn: record,
  } as unknown as Logger;
  logEvent(infoOff, event);
  return !called;
}
