"""The parts of the dtp protocol that the worker and the client share: limits,
feature names, error codes, task type names, and readers for the fields of
incoming messages (a field of the wrong JSON type is a protocol violation).

Wire names stay as the protocol spells them (``jobId``, ``attemptNumber``);
the Python API around them uses Python names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .framing import Message, ProtocolError

# ------------------------------------------------------------------ limits

MAX_CAPACITY = 1024
"""Largest ``WORKER_REGISTER.capacity``; a larger worker sends 1024 and ``slots``."""
MAX_SLOTS = 10_000
"""Largest ``WORKER_REGISTER.slots`` (the extension for capacities above 1,024)."""
MAX_PREFETCH_PER_SLOT = 4
MAX_ATTEMPTS_LIMIT = 1000
MAX_IDEMPOTENCY_KEY_LENGTH = 256
MAX_WORKER_ID_LENGTH = 200
MIN_TASK_TIMEOUT_MS = 1
MAX_TASK_TIMEOUT_MS = 86_400_000
MAX_RESULT_BYTES = 512 * 1024
"""Largest result, in UTF-8 bytes of its JSON string encoding without the quotes."""
MAX_ERROR_CHARS = 8 * 1024
MAX_TASK_TYPES_PER_WORKER = 1024
MAX_SAFE_INTEGER = 2**53 - 1
MAX_PROGRESS_MESSAGE_BYTES = 1024
PROGRESS_MESSAGES_PER_SECOND = 4
MAX_DEDUP_KEY_LENGTH = 256
MAX_DEDUP_WINDOW_MS = 366 * 86_400_000
"""Longest ``throttle`` window (``dedup_window_ms``): 366 days."""
MAX_RETRY_AFTER_MS = 86_400_000
"""Longest wait of a ``dtp.RateLimited``: one day."""
DEDUP_MODES = ("active", "throttle", "debounce")
RATE_LIMIT_SCOPES = ("job", "group", "queue")

# ---------------------------------------------------------------- features

FEATURES: frozenset[str] = frozenset(
    {
        "drain",
        "heartbeatAck",
        "taskTypes",
        "retryable",
        "assignLimits",
        "prefetch",
        "progress",
        "slots",
        "requeue",
        "queues",
        "parents",
        "children",
        "steps",
        "rateLimits",
        "signals",
        "reattach",
        "moreHeld",
    }
)


def parse_features(value: object) -> frozenset[str]:
    """The known features of ``WORKER_REGISTERED.features`` (absent or null: none)."""
    if not isinstance(value, list):
        return frozenset()
    return frozenset(name for name in value if isinstance(name, str) and name in FEATURES)


# ------------------------------------------------------------- error codes

UNKNOWN_JOB = "UNKNOWN_JOB"
INVALID_PAYLOAD = "INVALID_PAYLOAD"
UNSUPPORTED_REQUEST = "UNSUPPORTED_REQUEST"
MALFORMED_REQUEST = "MALFORMED_REQUEST"
WORKER_REPLACED = "WORKER_REPLACED"
UNAUTHENTICATED = "UNAUTHENTICATED"
TLS_REQUIRED = "TLS_REQUIRED"
NOT_LEADER = "NOT_LEADER"

REFUSAL_CODES: frozenset[str] = frozenset({WORKER_REPLACED, UNAUTHENTICATED, TLS_REQUIRED})
"""ERROR codes after which a worker stops instead of dialling again."""


def text_of(msg: Mapping[str, Any], name: str, default: str = "") -> str:
    """A field meant for people (a message, a reason): a string as it is, a
    number as its digits, anything else by its JSON type only (its text could
    be megabytes, or nest too deep to print); ``default`` when absent or null."""
    value = msg.get(name)
    if value is None:
        return default
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)):
        return str(value)
    return f"<{type(value).__name__}>"


def is_not_understood(reply: Mapping[str, Any]) -> bool:
    """True when an ``ERROR`` means the peer did not understand the request (a v1 peer)."""
    code = reply.get("code")
    if code in (UNSUPPORTED_REQUEST, MALFORMED_REQUEST):
        return True
    if code is not None:
        return False
    text = text_of(reply, "message")
    return "Malformed request" in text or "Undecodable" in text or "Unsupported request" in text


_INFERRED_CODES = (
    ("UNKNOWN_JOB", lambda m: "Unknown job" in m),
    ("INVALID_PAYLOAD", lambda m: m.startswith("Invalid payload")),
    ("IDEMPOTENCY_CONFLICT", lambda m: "Idempotency key" in m),
)


def error_code(reply: Mapping[str, Any]) -> str:
    """The stable code of an ``ERROR``: its own, else read from a v1 peer's message."""
    code = reply.get("code")
    if isinstance(code, str) and code.strip():
        return code
    message = text_of(reply, "message")
    for inferred, test in _INFERRED_CODES:
        if test(message):
            return inferred
    return "REMOTE_ERROR"


# -------------------------------------------------------------- task types

BUILTIN_TASK_TYPES = ("SLEEP", "WORD_COUNT", "SHA256", "PRIME_COUNT", "FAIL")
TASK_SHORTCUTS = ("sleep", "word-count", "sha256", "prime-count", "fail")
CUSTOM_TASK_TYPE_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
_RESERVED = frozenset(name.lower() for name in BUILTIN_TASK_TYPES + TASK_SHORTCUTS)


def custom_name_problem(name: object) -> str | None:
    """Why a task module may not declare ``name``, or None when it may."""
    if not isinstance(name, str):
        return f"a task name must be a string, got {type(name).__name__}"
    if CUSTOM_TASK_TYPE_PATTERN.fullmatch(name) is None:
        return (
            f"task name {name[:80]!r} does not match {CUSTOM_TASK_TYPE_PATTERN.pattern} "
            "(a letter, then up to 63 letters, digits, '_', '.' or '-')"
        )
    if name.lower() in _RESERVED:
        return f"task name {name!r} is reserved (a built-in task type or CLI shortcut)"
    return None


def is_valid_task_type(name: str) -> bool:
    return name in BUILTIN_TASK_TYPES or custom_name_problem(name) is None


# ------------------------------------------------------ reading a message

from .shapes import JobSnapshot as JobSnapshot  # noqa: E402 - as the coordinator sends it

TERMINAL_STATES: frozenset[str] = frozenset({"COMPLETED", "FAILED", "CANCELLED"})
JOB_STATES = (
    "QUEUED",
    "RUNNING",
    "RETRY_WAIT",
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "SCHEDULED",
    "WAITING",
)
KNOWN_STATES = ("SCHEDULED", "WAITING")
"""The job states beyond version 1's six that this client understands: sent as
``knownStates`` on every request whose reply carries job snapshots (a
coordinator shows any other state as its v1 equivalent)."""
PRIORITIES = ("HIGH", "NORMAL", "LOW")


def _bad(msg: Mapping[str, Any], name: str, expected: str) -> ProtocolError:
    return ProtocolError(
        "PROTOCOL_BAD_FIELD",
        f"{msg.get('type')}.{name} must be {expected}, got {type(msg.get(name)).__name__}",
    )


def get_str(msg: Mapping[str, Any], name: str) -> str:
    value = msg.get(name)
    if not isinstance(value, str):
        raise _bad(msg, name, "a string")
    return value


def get_opt_str(msg: Mapping[str, Any], name: str) -> str | None:
    value = msg.get(name)
    if value is not None and not isinstance(value, str):
        raise _bad(msg, name, "a string or null")
    return value


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if abs(value) <= MAX_SAFE_INTEGER else None
    if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
        return int(value)
    return None


def get_int(msg: Mapping[str, Any], name: str) -> int:
    value = _as_int(msg.get(name))
    if value is None:
        raise _bad(msg, name, "an integer")
    return value


def get_opt_int(msg: Mapping[str, Any], name: str) -> int | None:
    if msg.get(name) is None:
        return None
    return get_int(msg, name)


def get_bool(msg: Mapping[str, Any], name: str) -> bool:
    value = msg.get(name)
    if not isinstance(value, bool):
        raise _bad(msg, name, "a boolean")
    return value


def get_object(msg: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = msg.get(name)
    if not isinstance(value, dict):
        raise _bad(msg, name, "an object")
    return value


def get_str_list(msg: Mapping[str, Any], name: str) -> list[str] | None:
    value = msg.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(msg, name, "an array of strings")
    return list(value)


def expect_type(msg: Message, allowed: Sequence[str]) -> str:
    kind = get_str(msg, "type")
    if kind not in allowed:
        raise ProtocolError("PROTOCOL_UNKNOWN_TYPE", f"unexpected {kind[:60]} from the peer")
    return kind


TRUNCATED_MARK = "... (truncated)"
"""What follows a text cut to ``MAX_ERROR_CHARS`` (an attempt's error, a log field)."""


def truncate_error(text: str) -> str:
    """An attempt error cut as the coordinator cuts it (so the frame stays small);
    log fields are cut the same way."""
    if len(text) <= MAX_ERROR_CHARS:
        return text
    return text[:MAX_ERROR_CHARS] + TRUNCATED_MARK
