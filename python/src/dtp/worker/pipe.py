"""The pipes between the worker and its task processes: frames of the wire
protocol's framing, each holding one message or a ``BATCH`` of them.

    worker -> child   INIT      task modules, import path, log level, role
                                (``shared`` or ``isolated``); first, once
                      RUN       one attempt: requestId, taskType, payload, ids, limits,
                                parents, recorded steps (steps, stepCount), features
                      ABORT     requestId, reason: set ctx.cancelled (and cancel an
                                async handler's asyncio task)
                      ANSWER    requestId, callId, reply: the coordinator's reply to a
                                call (or an ERROR, the worker's or the coordinator's)
    child -> worker   LOADED    the task names of the modules, and which of them
                                are isolated; or
                      LOAD_FAILED  the module and the problem (every RUN then fails)
                      STARTED   requestId: the payload passed its checks; the handler runs
                      LOG       a line a handler logged (requestId: whose, or null)
                      PROGRESS  requestId, fraction, message (ctx.progress)
                      SUCCEEDED requestId, result, resultFormat (checked against the limit)
                      FAILED    requestId, error, retryable, and rateLimited
                                ({retryAfterMillis, scope}) when it raised RateLimited
                      SUSPENDED requestId, sleepMillis, waitForJobId, waitForSignal or
                                waitForEvent: the handler slept or waits (ctx.sleep,
                                ctx.wait_for, ctx.wait_for_signal, ctx.wait_for_event);
                                the attempt ends
                      CALL      requestId, callId, call: a call of the handler
                                (RECORD_STEP, GET_STEPS, ENQUEUE_CHILD) for the coordinator
                      ALIVE     a shared process's event loop turned (every 25 ms)
                      LEFTOVERS a shared process that runs no attempt has processes
                                of its handlers still running
    both ways         BATCH     messages: the messages of one turn of the sender's loop,
                                in order (many attempts, or many results, in one frame)

A message is encoded once, when it is made (``encode_message``), so a batch
is put together from bytes (``batch_frames``) and never exceeds
``PIPE_FRAME_BYTES``: what does not fit goes in the next frame.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..framing import HEADER_BYTES, FrameTooLargeError, with_json_depth

PIPE_FRAME_BYTES = 8 * 1_048_576
"""Largest frame on the pipes (a payload is at most 1 MiB; a result is checked first)."""

ALIVE_INTERVAL_S = 0.025
"""How often a shared task process's event loop says it turns."""

ANSWER_WINDOW_S = 0.1
"""A shared task process not heard from for longer is passed over for new
attempts while another one answers."""

_BATCH_HEAD = b'{"type":"BATCH","messages":['
_BATCH_TAIL = b"]}"
_PART_LIMIT = PIPE_FRAME_BYTES - len(_BATCH_HEAD) - len(_BATCH_TAIL)


def encode_message(message: Mapping[str, Any], allow_nan: bool = True) -> bytes:
    """One message as UTF-8 JSON (an infinity travels: the pipes carry what the
    worker decoded). Raises ``FrameTooLargeError`` when it could never fit in a
    frame, ``ValueError`` or ``TypeError`` for what JSON cannot carry."""

    def dump(ascii_only: bool) -> str:
        return json.dumps(
            message, ensure_ascii=ascii_only, separators=(",", ":"), allow_nan=allow_nan
        )

    try:
        body = with_json_depth(lambda: dump(False)).encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate has no UTF-8 form: escape everything outside ASCII instead.
        body = with_json_depth(lambda: dump(True)).encode("ascii")
    if len(body) > _PART_LIMIT:
        raise FrameTooLargeError(
            f"a {message.get('type', 'message')} of {len(body)} bytes does not fit on the pipe "
            f"({_PART_LIMIT} bytes at most)"
        )
    return body


def frame(body: bytes) -> bytes:
    """The frame of an encoded message."""
    return len(body).to_bytes(HEADER_BYTES, "big", signed=True) + body


def batch_frames(bodies: Iterable[bytes]) -> list[bytes]:
    """Encoded messages, in order, as frames: a lone message as itself, several
    as ``BATCH`` frames of at most ``PIPE_FRAME_BYTES`` each."""
    frames: list[bytes] = []
    group: list[bytes] = []
    size = 0

    def close_group() -> None:
        if len(group) == 1:
            frames.append(frame(group[0]))
        elif group:
            frames.append(frame(_BATCH_HEAD + b",".join(group) + _BATCH_TAIL))
        group.clear()

    for body in bodies:
        if group and size + 1 + len(body) > _PART_LIMIT:
            close_group()
            size = 0
        group.append(body)
        size += len(body) + 1
    close_group()
    return frames


def unbatch(message: Mapping[str, Any]) -> list[Any]:
    """The messages a frame held: a ``BATCH``'s list, or the message itself."""
    if message.get("type") != "BATCH":
        return [message]
    inner = message.get("messages")
    if not isinstance(inner, list):
        raise ValueError("a BATCH without a list of messages")
    return inner
