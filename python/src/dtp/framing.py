"""Frames of the dtp wire protocol: a 4-byte big-endian signed length N, then N
bytes of UTF-8 JSON holding one object with a string ``type``.

``encode_frame`` refuses an empty or oversized payload before anything is
written. ``FrameDecoder`` reassembles frames from reads cut anywhere; it checks
a declared length before it keeps any of the payload, so a peer that announces
2 GiB costs nothing but its connection.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any

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


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def encode_json(value: Any) -> str:
    """Compact JSON text, as UTF-8 would carry it (no ASCII escapes, no NaN)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def encode_frame(message: Mapping[str, Any], max_bytes: int = MAX_FRAME_BYTES) -> bytes:
    """The frame of ``message``; raises ``FrameTooLargeError`` past ``max_bytes``."""
    text = encode_json(message)
    try:
        body = text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (a JSON peer may send one, escaped) has no UTF-8 form:
        # escape everything outside ASCII instead, which JSON readers decode back.
        body = json.dumps(message, separators=(",", ":"), allow_nan=False).encode("ascii")
    if len(body) > max_bytes:
        raise FrameTooLargeError(
            f"a {message.get('type', 'message')} of {len(body)} bytes does not fit in a frame "
            f"({max_bytes} bytes at most)"
        )
    return _HEADER.pack(len(body)) + body


def decode_payload(body: bytes) -> Message:
    """One frame's payload as a message; raises ``ProtocolError``."""
    try:
        value = json.loads(body.decode("utf-8"), parse_constant=_no_constants)
    except (UnicodeDecodeError, ValueError) as err:
        raise ProtocolError("PROTOCOL_MALFORMED_JSON", f"frame is not UTF-8 JSON: {err}") from None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ProtocolError("PROTOCOL_NOT_AN_OBJECT", "frame is not a JSON object with a type")
    version = value.get("v")
    if version is not None and (type(version) is not int or version != 1):
        raise ProtocolError("PROTOCOL_BAD_VALUE", f"unsupported protocol version {version!r}")
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
    """Incremental decoder: ``feed`` bytes as they arrive, get whole messages back."""

    def __init__(self, max_bytes: int = MAX_FRAME_BYTES) -> None:
        self._max_bytes = max_bytes
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
            out.append(decode_payload(body))
