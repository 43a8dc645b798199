/**
 * Every action asks first: a modal with what will happen, a confirm button
 * and a cancel button. While the action runs the buttons are disabled; its
 * error, if any, is shown in the dialog.
 */
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';

export interface ConfirmProps {
  title: string;
  children: ComponentChildren;
  confirmLabel: string;
  /** The action; resolves when done (the dialog closes), rejects with a message to show. */
  onConfirm: () => Promise<void>;
  onClose: () => void;
  danger?: boolean;
}

export function ConfirmDialog(props: ConfirmProps) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const confirm = (): void => {
    setBusy(true);
    setError(null);
    props.onConfirm().then(
      () => props.onClose(),
      (err: unknown) => {
        setBusy(false);
        setError(err instanceof Error ? err.message : String(err));
      },
    );
  };
  return (
    <div class="modal-backdrop" role="presentation">
      <div
        class="modal"
        role="dialog"
        aria-modal="true"
        aria-label={props.title}
        data-testid="confirm-dialog"
      >
        <h2>{props.title}</h2>
        <div class="modal-body">{props.children}</div>
        {error !== null && <p class="error">{error}</p>}
        <div class="modal-actions">
          <button
            type="button"
            onClick={props.onClose}
            disabled={busy}
            data-testid="confirm-cancel"
          >
            Keep it
          </button>
          <button
            type="button"
            class={props.danger === true ? 'danger' : 'primary'}
            onClick={confirm}
            disabled={busy}
            data-testid="confirm-ok"
          >
            {props.confirmLabel}
          </button>
        </div>
      </div>
    </div>
  );
}
