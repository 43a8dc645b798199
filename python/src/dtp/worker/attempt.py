"""One attempt a worker holds, from its ``TASK_ASSIGN`` to its end: where it
runs (the pool), its deadline, its stop, its progress, and its result.

States (``state``): ``running`` (in the pool: waiting there, or running in a
task process) -> ``finished`` (it ended by itself: an outcome to report) |
``stopped`` (a cancel or its deadline: never reported) | ``abandoned`` (its
connection was lost and it still ran when the worker registered again
without taking it back, or the worker closed: never reported). ``on_done``
is told once, as it leaves ``running``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..framing import Message
from ..protocol import (
    PROGRESS_MESSAGES_PER_SECOND,
    get_int,
    get_object,
    get_opt_int,
    get_str,
)
from .pool import TaskPool
from .pool_task import Outcome, TaskHandle
from .timers import ProgressThrottle

if TYPE_CHECKING:
    from .lane import Lane
    from .link import Link

log = logging.getLogger("dtp.worker")


def _fields(**values: Any) -> dict[str, Any]:
    return {"fields": values}


@dataclass(frozen=True)
class Assignment:
    """A ``TASK_ASSIGN``, its fields read (``ProtocolError`` for a wrong type)."""

    job_id: str
    attempt_id: str
    attempt_number: int
    task_type: str
    payload: dict[str, Any]
    timeout_ms: int | None
    max_attempts: int | None
    parents: list[Any] | None = None
    steps: list[Any] | None = None
    step_count: int | None = None

    @classmethod
    def read(cls, message: Message) -> Assignment:
        parents = message.get("parents")
        steps = message.get("steps")
        return cls(
            job_id=get_str(message, "jobId"),
            attempt_id=get_str(message, "attemptId"),
            attempt_number=get_int(message, "attemptNumber"),
            task_type=get_str(message, "taskType"),
            payload=get_object(message, "payload"),
            timeout_ms=get_opt_int(message, "timeoutMillis"),
            max_attempts=get_opt_int(message, "maxAttempts"),
            parents=parents if isinstance(parents, list) else None,
            steps=steps if isinstance(steps, list) else None,
            step_count=get_opt_int(message, "stepCount"),
        )


def result_message(
    worker_id: str, job_id: str, attempt_id: str, outcome: Outcome, features: frozenset[str]
) -> Message:
    """The ``TASK_RESULT`` of an outcome, with the extensions the coordinator offered:
    ``retryable: false`` needs ``retryable``; ``requeue: true`` needs ``requeue``
    (without it, a requeued attempt is a failure that may be retried); ``rateLimited``
    needs ``rateLimits`` (without it, the failure, retryable, says ``RATE_LIMITED:``
    and the attempt counts)."""
    message: Message = {
        "type": "TASK_RESULT",
        "workerId": worker_id,
        "jobId": job_id,
        "attemptId": attempt_id,
        "success": outcome.success,
        "result": outcome.result if outcome.success else None,
        "error": None if outcome.success else outcome.error,
    }
    if outcome.success and outcome.result_format == "json":
        message["resultFormat"] = "json"
    if not outcome.success and not outcome.retryable and "retryable" in features:
        message["retryable"] = False
    if not outcome.success and outcome.requeue and "requeue" in features:
        message["requeue"] = True
    if not outcome.success and outcome.rate_limited is not None and "rateLimits" in features:
        message["rateLimited"] = dict(outcome.rate_limited)
    return message


def suspend_message(worker_id: str, job_id: str, attempt_id: str, suspend: Message) -> Message:
    """The ``TASK_SUSPEND`` of a handler that slept or waits (feature ``steps``; a signal
    or event wait, feature ``signals``)."""
    return {
        "type": "TASK_SUSPEND",
        "workerId": worker_id,
        "jobId": job_id,
        "attemptId": attempt_id,
        **suspend,
    }


CallSink = Callable[["Attempt", Message, Callable[[Message], None]], None]
"""Takes a handler's call (the attempt, the call, where its answer goes)."""

HANDLER_FEATURES = ("parents", "children", "steps", "signals")
"""The features a handler's ``ctx`` uses, passed on with each attempt."""


ProgressSink = Callable[["Attempt", float, "str | None"], None]


class Attempt:
    def __init__(
        self,
        assignment: Assignment,
        link: Link,
        lane: Lane,
        on_done: Callable[[Attempt, Outcome | None], None],
    ) -> None:
        self.assignment = assignment
        self.job_id = assignment.job_id
        self.attempt_id = assignment.attempt_id
        self.link = link
        """The connection it was assigned on, or carried over to (its result goes there,
        or is late)."""
        self.lane = lane
        """The worker's lane it belongs to (the one its shard's session is in)."""
        self.state = "running"
        self.started_at = time.monotonic()
        self._on_done = on_done
        self._handle: TaskHandle | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self._progress: ProgressThrottle | None = None

    def start(
        self,
        pool: TaskPool,
        limits: bool,
        progress: ProgressSink | None,
        features: frozenset[str] = frozenset(),
        on_call: CallSink | None = None,
    ) -> None:
        """Hands it to the pool. ``limits``: the coordinator offered ``assignLimits``
        (its deadline and attempt limit count); ``progress``: where its progress
        goes, when the coordinator offered ``progress``."""
        a = self.assignment
        timeout_ms = a.timeout_ms if limits else None
        deadline_at_ms = None if timeout_ms is None else int(time.time() * 1000) + timeout_ms
        tags = {"job_id": a.job_id, "attempt_id": a.attempt_id}

        def on_log(level: int, name: str, text: str) -> None:
            logging.getLogger(name).log(level, text, extra=tags)

        handle = pool.run(
            {
                "taskType": a.task_type,
                "payload": a.payload,
                "jobId": a.job_id,
                "attemptId": a.attempt_id,
                "attemptNumber": a.attempt_number,
                "maxAttempts": a.max_attempts if limits else None,
                "deadlineAtMs": deadline_at_ms,
                "parents": a.parents or [],
                "steps": a.steps or [],
                "stepCount": a.step_count or 0,
                "features": [f for f in HANDLER_FEATURES if f in features],
            },
            on_log,
        )
        self._handle = handle
        if on_call is not None:
            calls = on_call
            task = handle.task

            def call(call_id: int, message: Message) -> None:
                calls(self, message, lambda reply: task.answer(call_id, reply))

            task.on_call = call
        if progress is not None:
            report = progress

            def send(fraction: float, message: str | None) -> None:
                if self.state == "running":
                    report(self, fraction, message)

            self._progress = ProgressThrottle(1 / PROGRESS_MESSAGES_PER_SECOND, send)
            handle.task.on_progress = self._progress.report
        if timeout_ms is not None:
            self._deadline = asyncio.get_running_loop().call_later(
                timeout_ms / 1000, self._on_deadline, timeout_ms
            )
        handle.task.on_started = self._on_started
        handle.outcome.add_done_callback(lambda f: self._on_outcome(f.result()))

    def _on_started(self, pid: int) -> None:
        if self.state != "running" or not log.isEnabledFor(logging.INFO):
            return
        log.info(
            "task started",
            extra=_fields(
                jobId=self.job_id,
                attemptId=self.attempt_id,
                attempt=self.assignment.attempt_number,
                taskType=self.assignment.task_type,
                pid=pid,
            ),
        )

    def _on_outcome(self, outcome: Outcome) -> None:
        if self.state != "running":
            return  # stopped or abandoned: never reported
        if self._progress is not None:
            self._progress.flush()  # the last progress goes before the result
        self._leave("finished")
        if outcome.cancelled:
            self._on_done(self, None)
            return
        if outcome.suspend is not None:
            if log.isEnabledFor(logging.INFO):
                log.info(
                    "task suspended",
                    extra=_fields(jobId=self.job_id, attemptId=self.attempt_id, **outcome.suspend),
                )
            self._on_done(self, outcome)
            return
        limited = outcome.rate_limited or {}
        if log.isEnabledFor(logging.INFO):
            log.info(
                "task finished",
                extra=_fields(
                    jobId=self.job_id,
                    attemptId=self.attempt_id,
                    success=outcome.success,
                    durationMs=round((time.monotonic() - self.started_at) * 1000),
                    error=None if outcome.success else outcome.error,
                    requeue=True if outcome.requeue else None,
                    retryAfterMs=limited.get("retryAfterMillis"),
                    scope=limited.get("scope"),
                ),
            )
        self._on_done(self, outcome)

    def _on_deadline(self, timeout_ms: int) -> None:
        self._deadline = None
        if self.state != "running":
            return
        log.warning(
            "deadline passed: stopping the task",
            extra=_fields(jobId=self.job_id, attemptId=self.attempt_id, timeoutMs=timeout_ms),
        )
        self.stop("deadline")

    def stop(self, reason: str) -> None:
        """Preempts it (``cancel`` or ``deadline``): its slot is free at once, and
        nothing it produces is reported."""
        if self.state != "running" or self._handle is None:
            return
        self._leave("stopped")
        self._on_done(self, None)
        stopped_at = time.monotonic()
        started = self._handle.started
        pid = started.result() if started.done() else None

        def done(f: asyncio.Future[str]) -> None:
            how = f.result()
            what = "the handler stopped" if how == "cooperative" else "its process was killed"
            log.info(
                f"task stopped: {what}",
                extra=_fields(
                    jobId=self.job_id,
                    attemptId=self.attempt_id,
                    reason=reason,
                    stopMs=round((time.monotonic() - stopped_at) * 1000),
                    pid=pid,
                ),
            )

        self._handle.stop(reason).add_done_callback(done)

    def abandon(self) -> None:
        """Gives it up unreported (its lease is lost, or the worker closes)."""
        if self.state != "running" or self._handle is None:
            return
        self._leave("abandoned")
        self._on_done(self, None)
        log.info("task abandoned", extra=_fields(jobId=self.job_id, attemptId=self.attempt_id))
        self._handle.stop("cancel")

    def _leave(self, state: str) -> None:
        self.state = state
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self._progress is not None:
            self._progress.dispose()
