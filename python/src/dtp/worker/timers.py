"""The timers of a worker: its heartbeats (a thread of their own), the
watchdog that judges a silent coordinator, and the throttle of an attempt's
progress reports."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable


class HeartbeatThread(threading.Thread):
    """Asks the loop to send a HEARTBEAT every interval, until stopped."""

    def __init__(
        self, interval: float, loop: asyncio.AbstractEventLoop, beat: Callable[[], None]
    ) -> None:
        super().__init__(name="dtp-heartbeat", daemon=True)
        self._interval = interval
        self._loop = loop
        self._beat = beat
        self._stopped = threading.Event()

    def run(self) -> None:
        next_at = time.monotonic() + self._interval
        while not self._stopped.wait(max(0.0, next_at - time.monotonic())):
            next_at += self._interval
            now = time.monotonic()
            if next_at < now:  # we were paused (SIGSTOP, a slow machine): no burst of beats
                next_at = now + self._interval
            try:
                self._loop.call_soon_threadsafe(self._beat)
            except RuntimeError:
                return  # the loop is closed

    def stop(self) -> None:
        self._stopped.set()


class Watchdog:
    """Drops a coordinator that confirmed heartbeatAck and then said nothing for ``timeout``.

    A timer that fires more than half a period late means this process was
    stalled itself (frozen, or starved): what the coordinator sent meanwhile
    is unread, so the silence is counted afresh instead of judged.
    """

    def __init__(self, timeout: float, on_silent: Callable[[float], None]) -> None:
        self.timeout = timeout
        self._on_silent = on_silent
        self._timer: asyncio.TimerHandle | None = None
        self._heard = 0.0
        self._due = 0.0

    def start(self) -> None:
        self.stop()
        self._heard = time.monotonic()
        self._arm(self.timeout)

    def heard(self) -> None:
        self._heard = time.monotonic()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self, delay: float) -> None:
        delay = max(0.001, delay)
        self._due = time.monotonic() + delay
        self._timer = asyncio.get_running_loop().call_later(delay, self._check)

    def _check(self) -> None:
        self._timer = None
        now = time.monotonic()
        if now - self._due > self.timeout / 2:
            self._heard = now
            self._arm(self.timeout)
            return
        silent = now - self._heard
        if silent >= self.timeout:
            self._on_silent(silent)
            return
        self._arm(self.timeout - silent)


class ProgressThrottle:
    """At most one TASK_PROGRESS per interval; the latest report always goes
    (at the end of the interval, or at once with ``flush``)."""

    def __init__(self, interval_s: float, send: Callable[[float, str | None], None]) -> None:
        self._interval_s = interval_s
        self._send = send
        self._last_sent = -float("inf")
        self._waiting: tuple[float, str | None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    def report(self, fraction: float, message: str | None) -> None:
        since = time.monotonic() - self._last_sent
        if self._timer is None and since >= self._interval_s:
            self._emit(fraction, message)
            return
        self._waiting = (fraction, message)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(
                self._interval_s - since, self.flush
            )

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        waiting, self._waiting = self._waiting, None
        if waiting is not None:
            self._emit(*waiting)

    def dispose(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._waiting = None

    def _emit(self, fraction: float, message: str | None) -> None:
        self._last_sent = time.monotonic()
        self._send(fraction, message)
