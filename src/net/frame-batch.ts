/**
 * Several messages of one type in one frame (feature `batches`): the
 * grouping of their JSON texts into frames no larger than the frame limit.
 *
 * A batch frame is `head` + the messages' texts joined by commas + `tail`,
 * for example `{"type":"TASK_ASSIGNS","attempts":[` … `]}`. A group of one
 * leaves as the message's own frame, so a peer sees a batch only when there
 * are at least two to carry; a message too large to share a frame with
 * another leaves alone.
 */
import { MAX_FRAME_BYTES } from '../protocol/framing.js';

/** How the texts of one batch are wrapped into one message. */
export interface BatchWrapper {
  /** The message type gathered (the other types leave as they are). */
  readonly type: string;
  /** The text before the first message, ending with `[`. */
  readonly head: string;
  /** The text after the last message, starting with `]`. */
  readonly tail: string;
}

/**
 * The frames' JSON texts for `texts` in order: consecutive texts share a
 * frame while it stays within `maxFrameBytes` (each text alone must fit;
 * the caller checked). `bytes[i]` is the UTF-8 length of `texts[i]`.
 */
export function batchTexts(
  texts: readonly string[],
  bytes: readonly number[],
  wrapper: BatchWrapper,
  maxFrameBytes: number = MAX_FRAME_BYTES,
): string[] {
  const frames: string[] = [];
  const overhead = Buffer.byteLength(wrapper.head) + Buffer.byteLength(wrapper.tail);
  let start = 0;
  while (start < texts.length) {
    // Widen the group while the next text still fits (one comma per joint).
    let end = start + 1;
    let size = overhead + (bytes[start] as number);
    while (end < texts.length && size + 1 + (bytes[end] as number) <= maxFrameBytes) {
      size += 1 + (bytes[end] as number);
      end++;
    }
    if (end - start === 1) frames.push(texts[start] as string);
    else frames.push(wrapper.head + texts.slice(start, end).join(',') + wrapper.tail);
    start = end;
  }
  return frames;
}

/** TASK_ASSIGNS: a coordinator's assignments to a worker that takes batches. */
export const ASSIGN_BATCH: BatchWrapper = {
  type: 'TASK_ASSIGN',
  head: '{"type":"TASK_ASSIGNS","attempts":[',
  tail: ']}',
};

/** TASK_RESULTS: a worker's results, to a coordinator that offers `batches`. */
export function resultBatch(workerId: string): BatchWrapper {
  return {
    type: 'TASK_RESULT',
    head: `{"type":"TASK_RESULTS","workerId":${JSON.stringify(workerId)},"results":[`,
    tail: ']}',
  };
}
