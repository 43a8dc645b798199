"""``client.queues`` and ``client.schedules``: the named queues' settings and
the recurring schedules. Each call is one request on the client's connection;
a coordinator that predates queues or schedules is found out first (a probe
on a connection of its own, once per address) and the call raises
``FeatureUnsupportedError`` with nothing sent.

    client.queues.set("emails", concurrency=5, rate_limit=(100, 60_000))
    client.queues.pause("emails")
    client.schedules.set("nightly", "reports.build", cron="0 3 * * *", timezone="Europe/Paris")
    client.schedules.trigger("nightly").result(timeout=60)
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from .errors import FeatureUnsupportedError, SubmitRejectedError, UnexpectedReplyError, remote_error
from .framing import Message
from .protocol import KNOWN_STATES, PRIORITIES, is_not_understood, text_of
from .shapes import QueueInfo, RateLimit, ScheduleSnapshot
from .submission import check_queue_name

if TYPE_CHECKING:
    from .client import Client, JobHandle

MAX_QUEUE_CONCURRENCY = 100_000
MAX_RATE_COUNT = 1_000_000
MAX_RATE_INTERVAL_MS = 86_400_000
MIN_EVERY_MS = 1000


class _Unset:
    """A setting left out of a change (``None`` clears it instead)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def _expect(request: str, reply: Message, kind: str, feature: str) -> Message:
    if reply["type"] == kind:
        return reply
    if reply["type"] == "ERROR":
        if is_not_understood(reply):
            raise FeatureUnsupportedError(feature, text_of(reply, "message"))
        raise remote_error(reply)
    raise UnexpectedReplyError(request, str(reply["type"]))


def _concurrency(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer 1..{MAX_QUEUE_CONCURRENCY}, got {value!r}")
    if not 1 <= value <= MAX_QUEUE_CONCURRENCY:
        raise ValueError(f"{name} must be an integer 1..{MAX_QUEUE_CONCURRENCY}, got {value}")
    return value


def _rate(name: str, value: Any) -> RateLimit:
    """A rate given as ``(max, interval_ms)`` or ``{"max", "intervalMillis"}``."""
    if isinstance(value, Mapping):
        pair = (value.get("max"), value.get("intervalMillis"))
    elif isinstance(value, (tuple, builtins.list)) and len(value) == 2:
        pair = (value[0], value[1])
    else:
        raise TypeError(f"{name} must be (max, interval_ms), got {value!r}")
    count, interval = pair
    for what, number, high in (
        ("max", count, MAX_RATE_COUNT),
        ("interval_ms", interval, MAX_RATE_INTERVAL_MS),
    ):
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= high:
            raise ValueError(f"{name}: {what} must be an integer 1..{high}, got {number!r}")
    return {"max": cast(int, count), "intervalMillis": cast(int, interval)}


class Queues:
    """The named queues: ``list``, ``get``, ``pause``, ``resume``, ``set``."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def _send(self, message: Message, kind: str) -> Message:
        self._client._require("queues", "named queues")
        return _expect(str(message["type"]), self._client._request(message), kind, "queues")

    def list(self) -> builtins.list[QueueInfo]:
        """Every queue that has a job or a setting, sorted by name."""
        reply = self._send({"type": "LIST_QUEUES"}, "QUEUE_LIST")
        return cast("builtins.list[QueueInfo]", builtins.list(reply.get("queues") or []))

    def get(self, name: str) -> QueueInfo:
        """One queue (one without jobs or settings shows its defaults)."""
        check_queue_name(name, "name")
        for queue in self.list():
            if queue.get("name") == name:
                return queue
        return self.set(name)

    def pause(self, name: str, *, create: bool = False) -> QueueInfo:
        """No attempt of the queue starts until ``resume``; submissions are still taken.
        A name no job or setting has yet that is a near miss of one that has is refused
        (``UnknownQueueError``) unless ``create``."""
        return self._change(name, {"paused": True}, create)

    def resume(self, name: str, *, create: bool = False) -> QueueInfo:
        """Attempts of the queue start again (``UnknownQueueError`` for a queue without
        jobs or settings, unless ``create``)."""
        return self._change(name, {"paused": False}, create)

    def set(
        self,
        name: str,
        *,
        concurrency: int | None = UNSET,
        rate_limit: Any = UNSET,
        group_concurrency: int | None = UNSET,
        group_rate_limit: Any = UNSET,
    ) -> QueueInfo:
        """Changes the queue's limits; a limit left out keeps its value, ``None`` clears it.

        ``concurrency``: attempts of the queue holding a lease at once (1..100,000);
        ``rate_limit``: ``(max, interval_ms)``, at most ``max`` attempt starts in any
        window of ``interval_ms``; ``group_concurrency`` / ``group_rate_limit``: the same
        for each group key of the queue. Returns the queue once the change is durable.
        """
        fields: dict[str, Any] = {}
        clear: builtins.list[str] = []
        for field, value in (("concurrency", concurrency), ("groupConcurrency", group_concurrency)):
            if value is None:
                clear.append(field)
            elif value is not UNSET:
                fields[field] = _concurrency(field, value)
        for field, value in (("rateLimit", rate_limit), ("groupRateLimit", group_rate_limit)):
            if value is None:
                clear.append(field)
            elif value is not UNSET:
                fields[field] = _rate(field, value)
        if clear:
            fields["clear"] = clear
        return self._change(name, fields, False)

    def _change(self, name: str, fields: dict[str, Any], create: bool) -> QueueInfo:
        check_queue_name(name, "name")
        message: Message = {"type": "SET_QUEUE", "name": name, **fields}
        if create:
            message["create"] = True
        reply = self._send(message, "QUEUE_INFO")
        queue = cast(QueueInfo, dict(reply.get("queue") or {}))
        if reply.get("created") is True:
            queue["created"] = True
        return queue


class Schedules:
    """Recurring schedules: ``set``, ``list``, ``get``, ``pause``, ``resume``, ``delete``,
    ``trigger``."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def _send(self, message: Message, kind: str) -> Message:
        self._client._require("time", "schedules")
        if message["type"] == "SET_SCHEDULE" and message["schedule"].get("queue") not in (
            None,
            "default",
        ):
            self._client._require("queues", "named queues")
        return _expect(str(message["type"]), self._client._request(message), kind, "schedules")

    def set(
        self,
        name: str,
        task_type: str,
        *,
        payload: Mapping[str, Any] | None = None,
        cron: str | None = None,
        every_ms: int | None = None,
        timezone: str | None = None,
        overlap: str | None = None,
        catch_up: str | None = None,
        max_attempts: int | None = None,
        priority: str | None = None,
        timeout_millis: int | None = None,
        paused: bool | None = None,
        queue: str | None = None,
    ) -> ScheduleSnapshot:
        """Creates the schedule or replaces its definition (the same one again changes
        nothing). Exactly one of ``cron`` (5 fields, minute first, or 6, seconds first;
        in ``timezone``, default UTC) and ``every_ms`` (at least 1000; the first tick one
        interval after the set). ``overlap``: ``"allow"`` (default) or ``"skip"`` (no job
        while the previous one is not terminal); ``catch_up``: ``"latest"`` (default: one
        job for the latest tick missed during an outage) or ``"none"``. A bad definition is
        ``RemoteError`` ``INVALID_SCHEDULE`` naming the field; nothing is stored."""
        if (cron is None) == (every_ms is None):
            raise TypeError("give exactly one of cron= and every_ms=")
        if timezone is not None and cron is None:
            raise TypeError("timezone= goes with cron=")
        if priority is not None and priority not in PRIORITIES:
            raise ValueError(f"priority must be one of {', '.join(PRIORITIES)}, got {priority!r}")
        if payload is not None and not isinstance(payload, Mapping):
            raise TypeError("payload must be a JSON object (a dict)")
        schedule: Message = {
            "name": name,
            "taskType": task_type,
            "cron": cron,
            "everyMillis": every_ms,
            "timezone": None if cron is None else (timezone or "UTC"),
            "payload": dict(payload or {}),
            "maxAttempts": max_attempts,
            "priority": priority,
            "timeoutMillis": timeout_millis,
            "overlap": overlap,
            "catchUp": catch_up,
            "paused": paused,
        }
        if queue is not None:
            schedule["queue"] = check_queue_name(queue)
        reply = self._send({"type": "SET_SCHEDULE", "schedule": schedule}, "SCHEDULE_INFO")
        return cast(ScheduleSnapshot, reply["schedule"])

    def list(self) -> builtins.list[ScheduleSnapshot]:
        """Every schedule, sorted by name."""
        reply = self._send({"type": "LIST_SCHEDULES"}, "SCHEDULE_LIST")
        return cast("builtins.list[ScheduleSnapshot]", builtins.list(reply.get("schedules") or []))

    def get(self, name: str) -> ScheduleSnapshot:
        """One schedule with its ``recentJobs``, newest first (``UnknownScheduleError``)."""
        message: Message = {"type": "GET_SCHEDULE", "name": name, "knownStates": list(KNOWN_STATES)}
        reply = self._send(message, "SCHEDULE_INFO")
        schedule = cast(ScheduleSnapshot, dict(reply["schedule"]))
        schedule["recentJobs"] = builtins.list(reply.get("recentJobs") or [])
        return schedule

    def pause(self, name: str) -> ScheduleSnapshot:
        """No tick makes a job until ``resume`` (``trigger`` still does)."""
        reply = self._send({"type": "PAUSE_SCHEDULE", "name": name}, "SCHEDULE_INFO")
        return cast(ScheduleSnapshot, reply["schedule"])

    def resume(self, name: str) -> ScheduleSnapshot:
        reply = self._send({"type": "RESUME_SCHEDULE", "name": name}, "SCHEDULE_INFO")
        return cast(ScheduleSnapshot, reply["schedule"])

    def delete(self, name: str) -> None:
        """Deletes the schedule; the jobs it made stay."""
        self._send({"type": "DELETE_SCHEDULE", "name": name}, "SCHEDULE_DELETED")

    def trigger(self, name: str) -> JobHandle:
        """One job of the schedule now, outside its cadence (also while paused)."""
        self._client._require("time", "schedules")
        message: Message = {
            "type": "TRIGGER_SCHEDULE",
            "name": name,
            "knownStates": list(KNOWN_STATES),
        }
        reply = self._client._request(message)
        if reply["type"] == "SUBMIT_REJECTED":
            raise SubmitRejectedError(reply)
        submitted = _expect("TRIGGER_SCHEDULE", reply, "JOB_SUBMITTED", "schedules")
        return self._client._handle(submitted)
