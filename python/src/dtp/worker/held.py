"""What a worker says it still holds when it registers again
(``WORKER_REGISTER.heldAttempts``, docs/PROTOCOL.md "Taking attempts back"):
as many held attempts as the registration frame has room for (a connection
may send at most 128 KiB before it registers), and, when more are held, the
rest in ``HELD_ATTEMPTS`` parts once a coordinator that offers ``moreHeld``
has registered it ("Lists in parts")."""

from __future__ import annotations

from collections.abc import Sequence

from ..framing import Message, encode_json
from ..protocol import MAX_CAPACITY, MAX_PREFETCH_PER_SLOT

PENDING_MAX_FRAME_BYTES = 128 * 1024
"""The most a connection may send before it registers."""
MAX_HELD_ATTEMPTS = (1 + MAX_PREFETCH_PER_SLOT) * MAX_CAPACITY
"""The most ``WORKER_REGISTER.heldAttempts`` may list."""
MAX_HELD_ATTEMPTS_PER_MESSAGE = 2_000
"""The most one ``HELD_ATTEMPTS`` may list."""
_FRAME_MARGIN_BYTES = 2_048
"""Room kept in the frame for its header and anything the estimate leaves out."""


def _size(value: object) -> int:
    return len(encode_json(value).encode("utf-8", "surrogatepass"))


def split_held(register: Message, held: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """The held attempts ``register`` lists so that it fits its frame, and the rest."""
    room = PENDING_MAX_FRAME_BYTES - _FRAME_MARGIN_BYTES - _size(register)
    count = 0
    for entry in held:
        room -= _size(entry) + 1
        if room < 0 or count == MAX_HELD_ATTEMPTS:
            break
        count += 1
    return list(held[:count]), list(held[count:])


def held_parts(rest: Sequence[Message]) -> list[list[Message]]:
    """The ``HELD_ATTEMPTS`` parts of ``rest`` (one empty part when nothing is left)."""
    parts = [
        list(rest[start : start + MAX_HELD_ATTEMPTS_PER_MESSAGE])
        for start in range(0, len(rest), MAX_HELD_ATTEMPTS_PER_MESSAGE)
    ]
    return parts or [[]]
