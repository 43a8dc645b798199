"""``client.watch(job_id)`` and ``client.events(...)``: job events pushed by the
coordinator, read as an iterator of dicts ``{"event", "atMillis", "job"}``.

One ``SUBSCRIBE_JOBS`` on a connection of its own (never the connection of the
client's requests: a coordinator that does not understand it closes the
connection). From ``SUBSCRIBED`` on, the coordinator pushes a ``JOB_EVENT``
for each change of a matching job; nothing is polled.

- When the connection ends (a restart, a failover), the stream dials again,
  following the leader, and subscribes again; what changed meanwhile was not
  seen: a gap, told to ``on_gap`` (``{"reason": "reconnected", "missed":
  None}``). The coordinator's own gaps (the reader fell behind by 256 KiB)
  are told the same way (``{"reason": "missed", "missed": n}``). ``watch``
  reads the job again after a gap and reports a change as a ``state`` event.
- No connection for ``follow_timeout`` seconds ends the iteration with the
  ``TransportError``; a coordinator without events raises
  ``EventsUnsupportedError`` at the first ``next``.
- The subscription is in place when ``client.watch`` / ``client.events``
  returns: a change made after that is not missed.
- ``close()`` (idempotent, from any thread) ends the iteration, as does the
  end of ``with client.events(...) as events:``; a stream left unfinished is
  also closed when its client is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Callable, cast

from .connection import Connection
from .errors import EventsUnsupportedError, TransportError, remote_error
from .framing import Message
from .protocol import KNOWN_STATES, TERMINAL_STATES, is_not_understood
from .shapes import JobSnapshot, WatchEvent

if TYPE_CHECKING:
    from .client import Client

READ_SLICE_S = 0.25
"""Longest a read waits before it looks whether the stream was closed."""
RECONNECT_PAUSE_S = 0.1

GapSink = Callable[[dict[str, Any]], None]


def _same_view(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Nothing a watcher would see changed between the two (state, attempts, progress)."""
    return (
        a.get("state") == b.get("state")
        and a.get("attempts") == b.get("attempts")
        and a.get("progress") == b.get("progress")
    )


def _event(kind: str, at_millis: int, job: JobSnapshot) -> WatchEvent:
    return cast(WatchEvent, {"event": kind, "atMillis": at_millis, "job": job})


class EventStream(Iterator[WatchEvent]):
    """The events of one subscription (see the module's doc); made by ``client.watch``
    and ``client.events``."""

    def __init__(
        self,
        client: Client,
        filter: dict[str, str],
        *,
        watch: bool = False,
        on_gap: GapSink | None = None,
    ) -> None:
        self._client = client
        self._filter = filter
        self._watch = watch
        self._on_gap = on_gap
        self._conn: Connection | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._last: JobSnapshot | None = None
        self._started = False
        self._subscribed = False

    # ------------------------------------------------------------ lifetime

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Ends the stream (a read under way returns at once). Idempotent, any thread."""
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.shutdown()
        self._client._forget(self)

    @property
    def closed(self) -> bool:
        return self._closed

    # ----------------------------------------------------------- iterating

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> WatchEvent:
        try:
            return self._next()
        except BaseException:
            self.close()
            raise

    def subscribe(self) -> EventStream:
        """Subscribes now (``client.watch`` and ``client.events`` do, before they return):
        every change from then on is pushed. Raises ``EventsUnsupportedError``,
        ``RemoteError`` or ``TransportError``. Idempotent."""
        if not self._subscribed:
            self._subscribed = True
            try:
                self._subscribe()
            except BaseException:
                self.close()
                raise
        return self

    def _next(self) -> WatchEvent:
        self.subscribe()
        if not self._started:
            self._started = True
            if self._watch:
                return self._current()
        while True:
            if self._closed:
                raise StopIteration
            event = self._read()
            if event is None:
                continue
            if self._watch:
                self._last = event["job"]
                if event["job"].get("state") in TERMINAL_STATES:
                    self.close()  # the job ended: so does watching it (after this event)
            return event

    def _current(self) -> WatchEvent:
        job = self._client.status(self._filter["jobId"])
        self._last = job
        if job.get("state") in TERMINAL_STATES:
            self.close()
        return _event("current", int(time.time() * 1000), job)

    def _event_of(self, message: Message) -> WatchEvent | None:
        if message["type"] == "EVENTS_MISSED":
            return self._gap({"reason": "missed", "missed": message.get("missed")})
        if message["type"] == "ERROR":
            raise remote_error(message)
        job = cast(JobSnapshot, dict(message.get("job") or {}))
        event = _event(str(message.get("event")), int(message.get("atMillis") or 0), job)
        last = self._last
        if self._watch and last is not None:
            older = int(job.get("updatedAtMillis", 0)) < int(last.get("updatedAtMillis", 0))
            if older or _same_view(job, last):
                return None
        return event

    def _gap(self, gap: dict[str, Any]) -> WatchEvent | None:
        if self._on_gap is not None:
            self._on_gap(gap)
        if not self._watch or self._last is None:
            return None
        job = self._client.status(self._filter["jobId"])
        if _same_view(job, self._last):
            return None
        return _event("state", int(time.time() * 1000), job)

    # ---------------------------------------------------------- connection

    def _read(self) -> WatchEvent | None:
        """The next event to hand out; None when none came within a read's slice."""
        conn = self._conn
        if conn is None:
            return None
        try:
            message = conn.receive(READ_SLICE_S)
        except TransportError:
            if self._closed:
                return None
            self._resubscribe()
            return self._gap({"reason": "reconnected", "missed": None})
        return None if message is None else self._event_of(message)

    def _resubscribe(self) -> None:
        """Dials again (following the leader) until subscribed, for up to ``follow_timeout``."""
        lost_at = time.monotonic()
        while not self._closed:
            time.sleep(RECONNECT_PAUSE_S)
            try:
                self._subscribe()
                return
            except TransportError:
                if time.monotonic() - lost_at >= self._client._follow_timeout:
                    raise

    def _subscribe(self) -> None:
        conn = self._client._side_connection()
        try:
            reply = conn.request(
                {
                    "type": "SUBSCRIBE_JOBS",
                    "filter": self._filter,
                    "knownStates": list(KNOWN_STATES),
                },
                self._client._request_timeout,
            )
        except TransportError:
            conn.close()
            raise
        if reply["type"] == "ERROR":
            conn.close()
            if is_not_understood(reply) and reply.get("code") != "INVALID_REQUEST":
                raise EventsUnsupportedError()
            raise remote_error(reply)
        with self._lock:
            if self._closed:
                conn.close()
                return
            self._conn = conn
