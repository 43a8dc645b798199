"""An attempt as the pool of task processes holds it, and how it ended."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from .pool import TaskPool
    from .process import TaskProcess


@dataclass(frozen=True)
class Outcome:
    """How an attempt ended. A ``cancelled`` one is never reported; a
    ``requeue`` one was cut off through no doing of its own (the shared task
    process it ran in was ended), and ``error`` says why."""

    success: bool
    result: str | None = None
    result_format: str = "text"
    error: str | None = None
    retryable: bool = True
    cancelled: bool = False
    requeue: bool = False
    suspend: dict[str, Any] | None = None
    """The handler slept or waits (``sleepMillis``, ``waitForJobId``, ``waitForSignal`` or
    ``waitForEvent``): TASK_SUSPEND."""
    rate_limited: dict[str, Any] | None = None
    """The handler raised ``dtp.RateLimited``: ``{"retryAfterMillis", "scope"}``."""


LogSink = Callable[[int, str, str], None]
"""Receives (level, logger name, message) of what a handler logged."""


class PoolTask:
    def __init__(
        self, request_id: int, run: bytes, on_log: LogSink, job_id: str, isolated: bool
    ) -> None:
        loop = asyncio.get_running_loop()
        self.on_settled: Callable[[], None] = lambda: None
        self.on_started: Callable[[int], None] = lambda pid: None
        """Told synchronously (before any line the handler logs is passed on)."""
        self.request_id = request_id
        self.run = run
        """Its RUN message, encoded once when the attempt arrived."""
        self.on_log = on_log
        self.job_id = job_id
        self.isolated = isolated
        self.process: TaskProcess | None = None
        """Where it runs (or ran), once placed."""
        self.on_progress: Callable[[float, str | None], None] = lambda fraction, message: None
        """Told each ``ctx.progress`` of the handler."""
        self.on_call: Callable[[int, dict[str, Any]], None] = self._no_calls
        """Told each call of the handler (callId, the call); ``answer`` answers it."""
        self.outcome: asyncio.Future[Outcome] = loop.create_future()
        self.started: asyncio.Future[int | None] = loop.create_future()
        """The pid of its process once the handler began; None if it ended before."""

    @property
    def settled(self) -> bool:
        return self.outcome.done()

    def mark_started(self, pid: int) -> None:
        if not self.started.done():
            self.started.set_result(pid)
            self.on_started(pid)

    def _no_calls(self, call_id: int, call: dict[str, Any]) -> None:
        self.answer(
            call_id,
            {"type": "ERROR", "code": "UNSUPPORTED_FEATURE", "message": "no coordinator to call"},
        )

    def answer(self, call_id: int, reply: dict[str, Any]) -> None:
        """Passes a call's reply (or ERROR) back to the handler, while the attempt runs."""
        if self.process is not None and not self.settled:
            self.process.answer(self.request_id, call_id, reply)

    def settle(self, outcome: Outcome) -> bool:
        if self.outcome.done():
            return False
        if not self.started.done():
            self.started.set_result(None)
        self.outcome.set_result(outcome)
        self.on_settled()
        return True


@dataclass
class TaskHandle:
    task: PoolTask
    pool: TaskPool

    @property
    def outcome(self) -> asyncio.Future[Outcome]:
        return self.task.outcome

    @property
    def started(self) -> asyncio.Future[int | None]:
        return self.task.started

    def stop(self, reason: str) -> asyncio.Future[str]:
        """Settles the attempt as cancelled at once; resolves ``"cooperative"`` when
        its handler stopped within the grace, ``"terminated"`` when its process
        was ended."""
        return self.pool._stop(self.task, reason)
