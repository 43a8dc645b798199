"""Frames of the dtp wire protocol: a 4-byte big-endian signed length N, then N
bytes of UTF-8 JSON holding one object with a string ``type``.

``encode_frame`` refuses an empty or oversized payload before anything is
written. ``FrameDecoder`` reassembles frames from reads cut anywhere; it checks
a declared length before it keeps any of the payload, so a peer that announces
2 GiB costs nothing but its connection.

Depth: the coordinator accepts task payloads nested 1,000 levels deep, and
the ``json`` module follows nesting by recursion, which the interpreter stops
at about that depth (``RecursionError``). So a frame or value deeper than the
interpreter's default allows is decoded and encoded again with room for
``DEEP_JSON_LEVELS`` more levels of recursion; deeper than that is an error
(``JsonTooDeepError``, a ``ValueError``; ``ProtocolError`` for a frame), never
a ``RecursionError`` and never a stack the interpreter cannot hold.
"""

from __future__ import annotations

import json
import struct
import sys
import threading
from collections.abc import Mapping
from typing import Any, Callable, TypeVar

MAX_FRAME_BYTES = 1_048_576
"""Largest payload of one frame (1 MiB)."""

_HEADER = struct.Struct(">i")
HEADER_BYTES = _HEADER.size

Message = dict[str, Any]
"""One decoded frame: a JSON object whose ``type`` is a string."""


class ProtocolError(Exception):
    """The peer broke the framing or sent something that is not a message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class FrameTooLargeError(ValueError):
    """A message that would not fit in one frame; nothing was sent."""


class JsonTooDeepError(ValueError):
    """JSON nested deeper than this package follows (see ``DEEP_JSON_LEVELS``)."""


DEEP_JSON_LEVELS = 1200
"""Levels of recursion allowed beyond the interpreter's limit while JSON is
decoded or encoded: with the default limit (1000), nesting up to about 2,200
levels, well past the 1,000 of a payload inside its message. (Python 3.12
keeps a fixed limit of its own for this, about 1,500 levels; 3.13 about
10,000.)"""

_recursion_lock = threading.Lock()
_T = TypeVar("_T")


def with_json_depth(call: Callable[[], _T]) -> _T:
    """``call()`` (a ``json`` decode or encode), with room for ``DEEP_JSON_LEVELS``
    more levels of recursion if the interpreter's limit stopped it; raises
    ``JsonTooDeepError`` when that is not enough either."""
    try:
        return call()
    except RecursionError:
        pass
    # The limit is the interpreter's, shared by every thread: raised and put
    # back by one caller at a time, so it always returns to what it was.
    with _recursion_lock:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(limit + DEEP_JSON_LEVELS)
        try:
            return call()
        except RecursionError:
            raise JsonTooDeepError(
                f"JSON nested deeper than this package follows (about {DEEP_JSON_LEVELS} levels "
                "beyond the interpreter's recursion limit)"
            ) from None
        finally:
            sys.setrecursionlimit(limit)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_json(text: str, allow_nan: bool = False) -> Any:
    """The value of a JSON text, at any depth ``with_json_depth`` allows.

    ``NaN`` and ``Infinity`` are refused unless ``allow_nan`` (they are not
    JSON); a number too large for a float (``1e400``) is an infinity, as in
    every JSON reader. Raises ``ValueError``.
    """
    if allow_nan:
        return with_json_depth(lambda: json.loads(text))
    return with_json_depth(lambda: json.loads(text, parse_constant=_no_constants))


def encode_json(value: Any, allow_nan: bool = False) -> str:
    """Compact JSON text, as UTF-8 would carry it (no ASCII escapes; no NaN or
    infinity unless ``allow_nan``, as the pipes to task processes do)."""
    return with_json_depth(
        lambda: json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=allow_nan)
    )


def encode_frame(
    message: Mapping[str, Any], max_bytes: int = MAX_FRAME_BYTES, allow_nan: bool = False
) -> bytes:
    """The frame of ``message``; raises ``FrameTooLargeError`` past ``max_bytes``,
    ``JsonTooDeepError``, or ``ValueError`` for what JSON cannot carry."""
    text = encode_json(message, allow_nan)
    try:
        body = text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (a JSON peer may send one, escaped) has no UTF-8 form:
        # escape everything outside ASCII instead, which JSON readers decode back.
        body = with_json_depth(
            lambda: json.dumps(message, separators=(",", ":"), allow_nan=allow_nan)
        ).encode("ascii")
    if len(body) > max_bytes:
        raise FrameTooLargeError(
            f"a {message.get('type', 'message')} of {len(body)} bytes does not fit in a frame "
            f"({max_bytes} bytes at most)"
        )
    return _HEADER.pack(len(body)) + body


def decode_payload(body: bytes, allow_nan: bool = False) -> Message:
    """One frame's payload as a message; raises ``ProtocolError``."""
    try:
        value = decode_json(body.decode("utf-8"), allow_nan)
    except JsonTooDeepError as err:
        raise ProtocolError("PROTOCOL_BAD_VALUE", f"frame refused: {err}") from None
    except (UnicodeDecodeError, ValueError) as err:
        raise ProtocolError("PROTOCOL_MALFORMED_JSON", f"frame is not UTF-8 JSON: {err}") from None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ProtocolError("PROTOCOL_NOT_AN_OBJECT", "frame is not a JSON object with a type")
    version = value.get("v")
    if version is not None and (type(version) is not int or version != 1):
        plain = isinstance(version, (int, float, str))
        shown = repr(version)[:40] if plain else type(version).__name__
        raise ProtocolError("PROTOCOL_BAD_VALUE", f"unsupported protocol version {shown}")
    return value


def check_length(length: int, max_bytes: int = MAX_FRAME_BYTES) -> None:
    """Raises ``ProtocolError`` for a declared length outside 1..``max_bytes``."""
    if length <= 0 or length > max_bytes:
        raise ProtocolError(
            "PROTOCOL_BAD_LENGTH", f"declared frame length {length} is outside 1..{max_bytes}"
        )


def read_length(header: bytes) -> int:
    """The length a 4-byte prefix declares."""
    length: int = _HEADER.unpack(header)[0]
    return length


class FrameDecoder:
    """Incremental decoder: ``feed`` bytes as they arrive, get whole messages back.

    ``allow_nan``: accept ``NaN`` and ``Infinity`` (on the pipes between a
    worker and its task processes, never from a network peer)."""

    def __init__(self, max_bytes: int = MAX_FRAME_BYTES, allow_nan: bool = False) -> None:
        self._max_bytes = max_bytes
        self._allow_nan = allow_nan
        self._buffer = bytearray()
        self._needed: int | None = None

    @property
    def in_frame(self) -> bool:
        """True while part of a frame has arrived (end of stream now would be a truncation)."""
        return self._needed is not None

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Message]:
        self._buffer += data
        out: list[Message] = []
        while True:
            if self._needed is None:
                if len(self._buffer) < HEADER_BYTES:
                    return out
                length = read_length(bytes(self._buffer[:HEADER_BYTES]))
                check_length(length, self._max_bytes)
                del self._buffer[:HEADER_BYTES]
                self._needed = length
            if len(self._buffer) < self._needed:
                return out
            body = bytes(self._buffer[: self._needed])
            del self._buffer[: self._needed]
            self._needed = None
            out.append(decode_payload(body, self._allow_nan))
