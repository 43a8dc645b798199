"""What a submission may say, checked before anything is sent: the options of
``submit``, ``submit_many``, ``submit_flow`` and ``ctx.enqueue`` by their Python
names, and the fields of the wire message each one becomes (``queue`` ->
``queue``, ``group_key`` -> ``groupKey``, ``depends_on`` -> ``dependsOn``, ...).
An unknown option is a ``TypeError``, a bad value a ``ValueError`` or
``TypeError``, naming the option."""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable

from .framing import Message
from .protocol import (
    DEDUP_MODES,
    KNOWN_STATES,
    MAX_ATTEMPTS_LIMIT,
    MAX_DEDUP_KEY_LENGTH,
    MAX_DEDUP_WINDOW_MS,
    MAX_IDEMPOTENCY_KEY_LENGTH,
    MAX_SAFE_INTEGER,
    MAX_TASK_TIMEOUT_MS,
    MIN_TASK_TIMEOUT_MS,
    PRIORITIES,
)

MAX_FLOW_JOBS = 10_000
"""Most jobs in one ``submit_flow`` (one SUBMIT_FLOW)."""

MAX_DELAY_MS = 366 * 86_400_000
"""Furthest a delayed job may be due, from now."""


def _run_at_millis(options: dict[str, Any], now_ms: int) -> int | None:
    """Pops ``delay_ms`` / ``run_at`` from the options: the job's due time (epoch ms) or None."""
    delay_ms = options.pop("delay_ms", None)
    run_at = options.pop("run_at", None)
    if delay_ms is not None and run_at is not None:
        raise TypeError("give delay_ms or run_at, not both")
    if delay_ms is not None:
        if isinstance(delay_ms, bool) or not isinstance(delay_ms, int):
            raise TypeError("delay_ms must be an integer (milliseconds)")
        if not 0 <= delay_ms <= MAX_DELAY_MS:
            raise ValueError(f"delay_ms must be 0..{MAX_DELAY_MS}")
        return now_ms + delay_ms
    if run_at is None:
        return None
    if isinstance(run_at, datetime.datetime):
        if run_at.tzinfo is None:
            raise ValueError("run_at must be an aware datetime (with a time zone)")
        at_ms = int(run_at.timestamp() * 1000)
    elif isinstance(run_at, int) and not isinstance(run_at, bool):
        at_ms = run_at
    else:
        raise TypeError("run_at must be an aware datetime or epoch milliseconds")
    if at_ms < 0 or at_ms > now_ms + MAX_DELAY_MS:
        raise ValueError("run_at must be at most 366 days ahead")
    return at_ms


# ---------------------------------------------------------- submit options


def _check_priority(value: Any) -> Any:
    if value not in PRIORITIES:
        raise ValueError(f"priority must be one of {', '.join(PRIORITIES)}, got {value!r}")
    return value


def _int_in(name: str, low: int, high: int) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"{name} must be an integer in {low}..{high}, got {value!r}")
        return value

    return check


def _check_dedup_key(value: Any) -> Any:
    if not isinstance(value, str):
        raise TypeError(f"dedup_key must be a string, got {type(value).__name__}")
    if not 1 <= len(value) <= MAX_DEDUP_KEY_LENGTH:
        raise ValueError(
            f"dedup_key must be 1..{MAX_DEDUP_KEY_LENGTH} characters, got {len(value)}"
        )
    return value


def _check_dedup_mode(value: Any) -> Any:
    if value not in DEDUP_MODES:
        raise ValueError(f"dedup_mode must be one of {', '.join(DEDUP_MODES)}, got {value!r}")
    return value


def _expires_at_millis(options: dict[str, Any], now_ms: int) -> int | None:
    """Pops ``expires_at`` / ``expires_at_ms`` / ``expire_after_ms`` from the options:
    when the job expires unless an attempt has started (epoch ms), or None.
    ``expires_at_ms`` is epoch milliseconds only (``expires_at`` also takes a
    ``datetime``)."""
    expires_at = options.pop("expires_at", None)
    at_ms_option = options.pop("expires_at_ms", None)
    after_ms = options.pop("expire_after_ms", None)
    given = [
        n
        for n, v in (
            ("expires_at", expires_at),
            ("expires_at_ms", at_ms_option),
            ("expire_after_ms", after_ms),
        )
        if v is not None
    ]
    if len(given) > 1:
        raise TypeError(
            f"give one of expires_at, expires_at_ms, expire_after_ms, not {' and '.join(given)}"
        )
    if at_ms_option is not None:
        if isinstance(at_ms_option, bool) or not isinstance(at_ms_option, int):
            raise TypeError("expires_at_ms must be an integer (epoch milliseconds)")
        expires_at = at_ms_option
    if after_ms is not None:
        if isinstance(after_ms, bool) or not isinstance(after_ms, int):
            raise TypeError("expire_after_ms must be an integer (milliseconds)")
        if not 1 <= after_ms <= MAX_SAFE_INTEGER - now_ms:
            raise ValueError(f"expire_after_ms must be 1..{MAX_SAFE_INTEGER - now_ms}")
        return now_ms + after_ms
    if expires_at is None:
        return None
    if isinstance(expires_at, datetime.datetime):
        if expires_at.tzinfo is None:
            raise ValueError("expires_at must be an aware datetime (with a time zone)")
        at_ms = int(expires_at.timestamp() * 1000)
    elif isinstance(expires_at, int) and not isinstance(expires_at, bool):
        at_ms = expires_at
    else:
        raise TypeError("expires_at must be an aware datetime or epoch milliseconds")
    if not 0 <= at_ms <= MAX_SAFE_INTEGER:
        raise ValueError(f"expires_at is not a valid time: {expires_at!r}")
    if at_ms <= now_ms:
        # The coordinator would refuse it too; nothing is sent.
        raise ValueError("expires_at is in the past")
    return at_ms


def _check_dedup(message: Mapping[str, Any], where: str = "") -> None:
    """The deduplication options of one job, taken together (``TypeError`` naming the
    missing or extra one)."""
    mode = message.get("dedupMode")
    if mode is not None and message.get("dedupKey") is None:
        raise TypeError(f"{where}dedup_mode needs a dedup_key")
    if message.get("dedupWindowMillis") is not None and mode != "throttle":
        raise TypeError(f"{where}dedup_window_ms goes only with dedup_mode='throttle'")
    if mode == "throttle" and message.get("dedupWindowMillis") is None:
        raise TypeError(f"{where}dedup_mode='throttle' needs dedup_window_ms")
    if mode == "debounce" and message.get("runAtMillis") is None:
        raise TypeError(f"{where}dedup_mode='debounce' needs a delay (delay_ms or run_at)")


def _check_key(value: Any) -> Any:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_IDEMPOTENCY_KEY_LENGTH:
        raise ValueError(
            f"idempotency_key must be a string of 1..{MAX_IDEMPOTENCY_KEY_LENGTH} characters"
        )
    return value


_QUEUE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
MAX_GROUP_KEY_LENGTH = 128
MAX_PARENTS = 1000
PARENT_FAILURE_POLICIES = ("cancel", "run")


def check_queue_name(value: Any, what: str = "queue") -> str:
    """A queue name as the coordinator takes it; ``ValueError`` naming ``what`` otherwise."""
    if not isinstance(value, str) or _QUEUE_NAME.fullmatch(value) is None:
        raise ValueError(
            f"{what} must match {_QUEUE_NAME.pattern} (a letter, then up to 63 letters, digits, "
            f"'_', '.' or '-'), got {value!r}"
        )
    return value


def _check_group_key(value: Any) -> Any:
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= MAX_GROUP_KEY_LENGTH
        or any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value)
    ):
        raise ValueError(
            f"group_key must be 1..{MAX_GROUP_KEY_LENGTH} characters without control characters"
        )
    return value


def _check_parents(value: Any) -> Any:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError("depends_on must be a list of job ids")
    if any(not isinstance(job_id, str) or not job_id for job_id in value):
        raise TypeError("depends_on must be a list of job ids (non-empty strings)")
    if len(value) > MAX_PARENTS:
        raise ValueError(f"depends_on names {len(value)} jobs; at most {MAX_PARENTS}")
    return list(value) or None  # none: left out


def _check_policy(value: Any) -> Any:
    if value not in PARENT_FAILURE_POLICIES:
        raise ValueError(f"on_parent_failure must be 'cancel' or 'run', got {value!r}")
    return value


@dataclass(frozen=True)
class _Option:
    field: str
    check: Callable[[Any], Any]
    nullable: bool
    """Written as null when not given (a v1 field), else left out (an extension)."""


_SUBMIT_OPTIONS: dict[str, _Option] = {
    "priority": _Option("priority", _check_priority, nullable=True),
    "idempotency_key": _Option("idempotencyKey", _check_key, nullable=True),
    "max_attempts": _Option(
        "maxAttempts", _int_in("max_attempts", 1, MAX_ATTEMPTS_LIMIT), nullable=True
    ),
    "timeout_millis": _Option(
        "timeoutMillis",
        _int_in("timeout_millis", MIN_TASK_TIMEOUT_MS, MAX_TASK_TIMEOUT_MS),
        nullable=False,
    ),
    "queue": _Option("queue", check_queue_name, nullable=False),
    "group_key": _Option("groupKey", _check_group_key, nullable=False),
    "depends_on": _Option("dependsOn", _check_parents, nullable=False),
    "on_parent_failure": _Option("onParentFailure", _check_policy, nullable=False),
    "dedup_key": _Option("dedupKey", _check_dedup_key, nullable=False),
    "dedup_mode": _Option("dedupMode", _check_dedup_mode, nullable=False),
    "dedup_window_ms": _Option(
        "dedupWindowMillis", _int_in("dedup_window_ms", 1, MAX_DEDUP_WINDOW_MS), nullable=False
    ),
}
"""Per-job options of ``submit``, by their Python name. A new wire option is one line here."""

_LOCAL_OPTIONS = (
    "delay_ms",
    "run_at",
    "expires_at",
    "expires_at_ms",
    "expire_after_ms",
    "schema",
    "retries",
)
"""Options of ``submit`` that are not a field of the job (or are computed into one)."""


def _unknown_option(options: Mapping[str, Any], where: str) -> None:
    unknown = sorted(set(options) - set(_SUBMIT_OPTIONS) - set(_LOCAL_OPTIONS))
    if unknown:
        raise TypeError(
            f"{where}unknown submit option {unknown[0]!r}; known: "
            f"{', '.join([*_SUBMIT_OPTIONS, *_LOCAL_OPTIONS])}"
        )


def _names_queue(message: Mapping[str, Any]) -> bool:
    """Whether a job names a queue other than ``default`` or a group key (the
    ``queues`` extension: a coordinator without it would run it outside its queue)."""
    return message.get("queue") not in (None, "default") or message.get("groupKey") is not None


MAX_BATCH_JOBS = 1000
"""Most jobs in one ``submit_many`` (one SUBMIT_JOBS)."""


def _submit_message(
    task_type: str, payload: Mapping[str, Any], options: Mapping[str, Any]
) -> Message:
    message: Message = {
        "type": "SUBMIT_JOB",
        "taskType": task_type,
        "payload": dict(payload),
        "knownStates": list(KNOWN_STATES),
    }
    for name, option in _SUBMIT_OPTIONS.items():
        value = options.get(name)
        checked = option.check(value) if value is not None else None
        if checked is not None:
            message[option.field] = checked
        elif option.nullable:
            message[option.field] = None
    return message


def _job_message(
    task_type: str, payload: Mapping[str, Any], options: dict[str, Any], where: str = ""
) -> Message:
    """The ``SUBMIT_JOB`` of one job, its times computed from ``delay_ms`` / ``run_at`` and
    ``expires_at`` / ``expire_after_ms`` (popped from ``options``) and its deduplication
    options checked together; ``TypeError``/``ValueError`` before anything is sent."""
    now_ms = int(time.time() * 1000)
    run_at_millis = _run_at_millis(options, now_ms)
    expires_at_millis = _expires_at_millis(options, now_ms)
    message = _submit_message(task_type, payload, options)
    if run_at_millis is not None:
        message["runAtMillis"] = run_at_millis
    if expires_at_millis is not None:
        message["expiresAtMillis"] = expires_at_millis
    _check_dedup(message, where)
    return message


_FLOW_FIELDS = ("ref", "task_type", "payload")


def _flow_job(index: int, job: Any) -> Message:
    """One job of a flow as ``SUBMIT_FLOW`` carries it; ``TypeError``/``ValueError`` first."""
    if not isinstance(job, Mapping):
        raise TypeError(f"jobs[{index}] must be a dict")
    options = dict(job)
    ref, task_type, payload = (options.pop(name, None) for name in _FLOW_FIELDS)
    if not isinstance(ref, str) or not ref:
        raise TypeError(f"jobs[{index}].ref must be a non-empty string")
    if not isinstance(task_type, str) or not task_type:
        raise TypeError(f"jobs[{index}].task_type must be a non-empty string")
    if not isinstance(payload, Mapping):
        raise TypeError(f"jobs[{index}].payload must be a JSON object (a dict)")
    _unknown_option(options, f"jobs[{index}]: ")
    local = sorted(set(options) & {"schema", "retries"})
    if local:
        raise TypeError(f"jobs[{index}]: a flow's job takes no {local[0]!r}")
    message = _job_message(task_type, payload, options, f"jobs[{index}]: ")
    del message["type"], message["knownStates"]
    message["ref"] = ref
    message.setdefault("dependsOn", None)
    message.setdefault("runAtMillis", None)
    if message.get("idempotencyKey") is None:
        message.pop("idempotencyKey", None)
    return message
