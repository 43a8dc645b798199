/**
 * A job's signals on its page: what a WAITING job waits for (another job, a
 * signal, an event with its key) and until when, how many signals it holds
 * that no wait has taken, and the "Send signal" dialog (a name and a JSON
 * payload, sent once confirmed).
 */
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import type { JsonValue, WaitingFor } from '../../../src/protocol/messages.js';
import { api, type SignalResult } from '../api.js';
import { formatCountdown, formatTime } from '../format.js';
import { jobHref } from '../router.js';
import { ConfirmDialog } from './confirm.js';

/** What the job waits for, in words (with a link to a job it waits for). */
export function WaitingForText({ waitingFor, nowMs }: { waitingFor: WaitingFor; nowMs: number }) {
  const { jobId, signal, event, key, untilMillis } = waitingFor;
  let what: ComponentChildren;
  if (signal != null) {
    what = (
      <>
        signal <span class="mono">{signal}</span>
      </>
    );
  } else if (event != null) {
    what = (
      <>
        event <span class="mono">{event}</span>
        {key != null ? (
          <>
            {' '}
            with key <span class="mono">{key}</span>
          </>
        ) : (
          ' (any key)'
        )}
      </>
    );
  } else if (jobId != null) {
    what = (
      <>
        job{' '}
        <a class="mono" href={jobHref(jobId)}>
          {jobId}
        </a>{' '}
        to end
      </>
    );
  } else {
    what = <>something</>;
  }
  return (
    <span data-testid="job-waiting-for">
      {what}
      <span class="muted" data-testid="job-waiting-until">
        {untilMillis === null
          ? ', no time limit'
          : `, until ${formatTime(untilMillis)} (${formatCountdown(untilMillis - nowMs)})`}
      </span>
    </span>
  );
}

/** The payload text as JSON; empty = null. Throws a message for text that is not JSON. */
function parsePayload(text: string): JsonValue {
  if (text.trim() === '') return null;
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    throw new Error('The payload is not valid JSON.');
  }
}

/** What the page says once a signal was sent. */
export function signalNotice(result: SignalResult): string {
  return result.resumed
    ? `Signal ${result.name} sent: the job was waiting for it and goes on.`
    : `Signal ${result.name} sent: the job holds it (${result.signalsHeld} held) until a wait takes it.`;
}

/** "Send signal": a name and a JSON payload, sent to the job once confirmed. */
export function SendSignalDialog({
  jobId,
  suggested,
  onClose,
  onSent,
}: {
  jobId: string;
  /** The signal the job waits for, if any: the name's starting value. */
  suggested: string | null;
  onClose: () => void;
  onSent: (result: SignalResult) => void;
}) {
  const [name, setName] = useState(suggested ?? '');
  const [payload, setPayload] = useState('');
  return (
    <ConfirmDialog
      title="Send a signal to this job?"
      confirmLabel="Send signal"
      onClose={onClose}
      onConfirm={async () => {
        if (name.trim() === '') throw new Error('Give the signal a name.');
        onSent(await api.signal(jobId, name.trim(), parsePayload(payload)));
      }}
    >
      <p>
        A handler waiting in <span class="mono">ctx.waitForSignal</span> for this name goes on with
        it; otherwise the job holds it until a wait takes it. Signals cannot be taken back.
      </p>
      <div class="form-row">
        <label>
          Name
          <input
            name="signal-name"
            value={name}
            placeholder="approve"
            onInput={(e) => setName((e.target as HTMLInputElement).value)}
          />
        </label>
      </div>
      <label class="stacked">
        Payload (JSON, empty for null)
        <textarea
          name="signal-payload"
          rows={5}
          value={payload}
          placeholder='{"approvedBy": "ann"}'
          onInput={(e) => setPayload((e.target as HTMLTextAreaElement).value)}
        />
      </label>
    </ConfirmDialog>
  );
}
