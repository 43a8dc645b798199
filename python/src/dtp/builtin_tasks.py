"""The five built-in task types of the protocol, as the TypeScript worker runs
them: same payload checks (and error texts), same results. A Python worker
declares them beside its modules' tasks, so it can take any built-in job.

As on the TypeScript worker, ``PRIME_COUNT`` is isolated (a process to
itself: it may hold a CPU for seconds) and the others are shared: they run
among the ``async def`` handlers of a shared task process, ``SLEEP`` as an
``asyncio`` sleep, the others as the short calls they are.

Lengths count UTF-16 code units, as the coordinator counts them.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping
from typing import Any, Callable

from .framing import encode_json
from .tasks import InvalidPayloadError, TaskCancelled, TaskContext, TaskFailed

_EXCERPT = 40
_MAX_TEXT = 200_000


def _received(payload: Mapping[str, Any], field: str) -> str:
    if field not in payload:
        return "nothing"
    value = payload[field]
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, str) and len(value) > _EXCERPT:
        return f"{encode_json(value[:_EXCERPT])}… ({len(value)} characters)"
    return encode_json(value)


def _utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _integer(payload: Mapping[str, Any], field: str, low: int, high: int) -> int:
    value = payload.get(field)
    number: Any = value
    if isinstance(value, float) and value.is_integer():
        number = int(value)
    if isinstance(number, bool) or not isinstance(number, int) or not low <= number <= high:
        raise InvalidPayloadError(
            f"{field} must be an integer in {low}..{high}, got {_received(payload, field)}"
        )
    return number


def _text(payload: Mapping[str, Any], field: str = "text") -> str:
    value = payload.get(field)
    expected = f"{field} must be a string of at most {_MAX_TEXT} characters"
    if not isinstance(value, str):
        raise InvalidPayloadError(f"{expected}, got {_received(payload, field)}")
    length = _utf16_length(value)
    if length > _MAX_TEXT:
        raise InvalidPayloadError(f"{expected}, got one of {length} characters")
    return value


def sleep(payload: Mapping[str, Any], ctx: TaskContext) -> str:
    duration = _integer(payload, "durationMillis", 0, 600_000)
    if ctx.cancelled.wait(duration / 1000):
        raise TaskCancelled(ctx.cancel_reason or "cancel")
    return f"slept {duration} ms"


async def sleep_shared(payload: Mapping[str, Any], ctx: TaskContext) -> str:
    """``SLEEP`` among other attempts: a stop cancels it at once."""
    duration = _integer(payload, "durationMillis", 0, 600_000)
    await asyncio.sleep(duration / 1000)
    return f"slept {duration} ms"


_WHITESPACE = frozenset(
    [
        0x09,
        0x0A,
        0x0B,
        0x0C,
        0x0D,
        0x20,
        0xA0,
        0x1680,
        0x2028,
        0x2029,
        0x202F,
        0x205F,
        0x3000,
        0xFEFF,
        *range(0x2000, 0x200B),
    ]
)


def count_words(text: str) -> int:
    """Runs of characters that JavaScript's ``\\s`` does not match."""
    words = 0
    in_word = False
    for char in text:
        space = ord(char) in _WHITESPACE
        if not space and not in_word:
            words += 1
        in_word = not space
    return words


def word_count(payload: Mapping[str, Any], ctx: TaskContext) -> str:
    return str(count_words(_text(payload)))


def sha256(payload: Mapping[str, Any], ctx: TaskContext) -> str:
    text = _text(payload)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def count_primes_below(limit: int) -> int:
    """Primes ``p < limit``, by a sieve over the odd numbers."""
    if limit <= 2:
        return 0
    odd = limit // 2  # entry i stands for 2i + 1
    composite = bytearray(odd)
    i = 1
    while True:
        p = 2 * i + 1
        if p * p >= limit:
            break
        if not composite[i]:
            start = (p * p) // 2
            composite[start::p] = b"\x01" * len(range(start, odd, p))
        i += 1
    return 1 + (odd - 1) - composite.count(1, 1)


def prime_count(payload: Mapping[str, Any], ctx: TaskContext) -> str:
    limit = _integer(payload, "limit", 2, 50_000_000)
    ctx.raise_if_cancelled()
    return str(count_primes_below(limit))


def fail(payload: Mapping[str, Any], ctx: TaskContext) -> str:
    until = _integer(payload, "failUntilAttempt", 0, 1_000)
    if ctx.attempt_number < until:
        raise TaskFailed(f"deliberate failure on attempt {ctx.attempt_number}")
    return f"succeeded on attempt {ctx.attempt_number}"


BUILTIN_HANDLERS: dict[str, Callable[[Mapping[str, Any], TaskContext], str]] = {
    "SLEEP": sleep,
    "WORD_COUNT": word_count,
    "SHA256": sha256,
    "PRIME_COUNT": prime_count,
    "FAIL": fail,
}

ISOLATED_BUILTINS: frozenset[str] = frozenset({"PRIME_COUNT"})
"""The built-ins that run in a task process of their own."""

SHARED_BUILTINS: dict[str, Callable[[Mapping[str, Any], TaskContext], Any]] = {
    **{name: h for name, h in BUILTIN_HANDLERS.items() if name not in ISOLATED_BUILTINS},
    "SLEEP": sleep_shared,
}
"""The handlers of the other built-ins in a shared task process."""

BUILTIN_VALIDATORS: dict[str, Callable[[Mapping[str, Any]], object]] = {
    "SLEEP": lambda p: _integer(p, "durationMillis", 0, 600_000),
    "WORD_COUNT": _text,
    "SHA256": _text,
    "PRIME_COUNT": lambda p: _integer(p, "limit", 2, 50_000_000),
    "FAIL": lambda p: _integer(p, "failUntilAttempt", 0, 1_000),
}
"""Checks a built-in payload before the handler starts (the handler reads it again)."""
