"""One task process (``_child.py``), as the worker's event loop sees it.

Roles: ``shared`` (many attempts at once, each an asyncio task there) or
``isolated`` (one attempt at a time, which has the process to itself).

States: ``starting`` (until its pipes are set up and INIT sent) -> ``ready``
-> ``retiring`` (a shared process whose handlers left processes running: no
new attempt; ended once it runs none) -> ``killed`` (SIGKILL sent to its
group) -> ``exited`` (reaped); ``ready`` -> ``killed`` and ``starting`` ->
``exited`` too.

A stopped attempt (cancel, deadline) leaves ``attempts`` at once and waits in
``stopping`` for its grace: the process is told (ABORT), and ended when the
grace runs out before the attempt settles. The attempts still on a process
that ends are settled here: an isolated one fails (its process crashed, or
was killed); a shared one is requeued (``Outcome.requeue``), with the reason:
it was cut off through no doing of its own.

What the worker sends a process in one turn of its loop leaves in one write
(a BATCH of RUNs and ABORTs).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..framing import FrameDecoder, Message, ProtocolError
from ..protocol import RATE_LIMIT_SCOPES
from .pipe import ANSWER_WINDOW_S, PIPE_FRAME_BYTES, batch_frames, encode_message, unbatch
from .pool_task import Outcome, PoolTask

if TYPE_CHECKING:
    from .pool import TaskPool

log = logging.getLogger("dtp.worker")

LIVE_STATES = ("starting", "ready", "retiring")


class PipeReader(asyncio.Protocol):
    def __init__(self, child: TaskProcess) -> None:
        self._child = child
        self._decoder = FrameDecoder(PIPE_FRAME_BYTES)

    def data_received(self, data: bytes) -> None:
        try:
            for message in self._decoder.feed(data):
                for inner in unbatch(message):
                    if self._child.state == "exited":
                        return
                    self._child.on_message(inner if isinstance(inner, dict) else {})
        except (ProtocolError, ValueError) as err:
            self._child.fail(f"task process sent a malformed frame: {err}")
        except Exception as err:
            # A fault of the worker's own on what a task process said: it costs
            # that process (its attempts end as for a crash), never the worker.
            log.exception("failed on a message from a task process: ending it")
            self._child.fail(f"the worker failed on a message of its task process: {err!r}")

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._child.on_pipe_closed()


@dataclass
class _Stop:
    task: PoolTask
    timer: asyncio.TimerHandle
    waiter: asyncio.Future[str]
    reason: str
    grace: float


class TaskProcess:
    def __init__(self, pool: TaskPool, proc: subprocess.Popen[bytes], role: str) -> None:
        loop = asyncio.get_running_loop()
        self.pool = pool
        self.proc = proc
        self.pid = proc.pid
        self.role = role
        self.state = "starting"
        self.attempts: dict[int, PoolTask] = {}
        self.stopping: dict[int, _Stop] = {}
        self.last_heard = time.monotonic()
        self.blocked_since: float | None = None
        self.idle_since = time.monotonic()
        self.exited: asyncio.Future[None] = loop.create_future()
        self.loaded: asyncio.Future[Message] = loop.create_future()
        self._writer: asyncio.WriteTransport | None = None
        self._reader: asyncio.ReadTransport | None = None
        self._outbox: list[bytes] = []
        self._reaping = False
        self._ended_for: str | None = None
        """Why the worker ended it (what its shared attempts are told)."""

    @property
    def shared(self) -> bool:
        return self.role == "shared"

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    @property
    def load(self) -> int:
        return len(self.attempts) + len(self.stopping)

    @property
    def available(self) -> bool:
        """Can take an attempt now (an isolated process only when it runs none)."""
        if self.state != "ready":
            return False
        return self.shared or self.load == 0

    def answers(self, now: float) -> bool:
        return now - self.last_heard <= ANSWER_WINDOW_S

    def attach_writer(self, writer: asyncio.WriteTransport) -> None:
        self._writer = writer

    def attach_reader(self, reader: asyncio.ReadTransport) -> None:
        self._reader = reader

    def send_now(self, message: Message) -> None:
        if self._writer is not None and not self._writer.is_closing():
            for data in batch_frames([encode_message(message)]):
                self._writer.write(data)

    def _queue(self, body: bytes) -> None:
        if not self._outbox:
            asyncio.get_running_loop().call_soon(self._flush)
        self._outbox.append(body)

    def _flush(self) -> None:
        bodies, self._outbox = self._outbox, []
        if bodies and self._writer is not None and not self._writer.is_closing():
            for data in batch_frames(bodies):
                self._writer.write(data)

    # ------------------------------------------------------------- attempts

    def run(self, task: PoolTask) -> None:
        assert self.available, f"an attempt placed on a {self.role} process that is {self.state}"
        self.attempts[task.request_id] = task
        task.process = self
        self._queue(task.run)

    def answer(self, request_id: int, call_id: int, reply: Message) -> None:
        """A call's reply (or ERROR), back to the handler that made it."""
        if self.live:
            self._queue(
                encode_message(
                    {"type": "ANSWER", "requestId": request_id, "callId": call_id, "reply": reply}
                )
            )

    def stop(self, task: PoolTask, reason: str, grace: float) -> asyncio.Future[str]:
        """Fires the attempt's ``ctx.cancelled``; ends the process unless it settles in time.

        Resolves ``"cooperative"`` or ``"terminated"``.
        """
        waiter: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        if self.attempts.pop(task.request_id, None) is None or not self.live:

            def terminated(_: object) -> None:
                if not waiter.done():
                    waiter.set_result("terminated")

            self.exited.add_done_callback(terminated)
            return waiter
        timer = asyncio.get_running_loop().call_later(grace, self._grace_over, task.request_id)
        self.stopping[task.request_id] = _Stop(task, timer, waiter, reason, grace)
        self._queue(
            encode_message({"type": "ABORT", "requestId": task.request_id, "reason": reason})
        )
        return waiter

    def _grace_over(self, request_id: int) -> None:
        stop = self.stopping.get(request_id)
        if stop is None or not self.live:
            return
        others = len(self.attempts)
        if others:
            log.warning(
                "an attempt ignored its stop: ending its shared task process",
                extra=_fields(
                    pid=self.pid, jobId=stop.task.job_id, reason=stop.reason, requeued=others
                ),
            )
        self.end(
            f"its task process was ended because another attempt on it (job {stop.task.job_id}) "
            f"did not stop within the cancel grace ({round(stop.grace * 1000)} ms)"
        )

    def end(self, why: str) -> None:
        self._ended_for = self._ended_for or why
        self.kill()

    def kill(self) -> None:
        """Ends the process and its process group now, whatever they do (SIGKILL),
        and reaps it. Idempotent."""
        if self.state in ("killed", "exited"):
            return
        self.state = "killed"
        try:
            # Its pid is its group's id, and stays so until it is reaped (below).
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            try:
                self.proc.kill()
            except OSError:
                pass
        self.pool._background(self._reap())
        self.pool._ensure_processes()  # its replacement starts while it is reaped

    def fail(self, reason: str) -> None:
        self.end(reason)

    # ------------------------------------------------------------- messages

    def on_message(self, message: Message) -> None:
        kind = message.get("type")
        if kind in ("LOADED", "LOAD_FAILED"):
            self._heard()
            if not self.loaded.done():
                self.loaded.set_result(message)
        elif kind == "ALIVE":
            self._heard()
        elif kind == "LOG":
            self._on_log(message)
        elif kind == "PROGRESS":
            task = self.attempts.get(_request_id(message))
            if task is not None:
                text = message.get("message")
                task.on_progress(
                    float(message.get("fraction") or 0), text if isinstance(text, str) else None
                )
        elif kind == "CALL":
            task = self.attempts.get(_request_id(message))
            call = message.get("call")
            call_id = message.get("callId")
            if task is not None and isinstance(call, dict) and isinstance(call_id, int):
                task.on_call(call_id, call)
        elif kind == "LEFTOVERS":
            self.pool._retire(self, "its handlers left processes running")
        elif kind in ("STARTED", "SUCCEEDED", "FAILED", "SUSPENDED"):
            self._heard()
            self._on_attempt_message(kind, message)
        else:
            self.fail(f"task process sent an unexpected {str(kind)[:40]}")

    def _heard(self) -> None:
        self.last_heard = time.monotonic()
        if self.blocked_since is not None:
            log.info(
                "task process answers again",
                extra=_fields(
                    pid=self.pid, blockedMs=round((self.last_heard - self.blocked_since) * 1000)
                ),
            )
            self.blocked_since = None

    def _on_log(self, message: Message) -> None:
        request_id = _request_id(message)
        task = self.attempts.get(request_id)
        stop = self.stopping.get(request_id)
        if task is None and stop is not None:
            task = stop.task
        level = int(message.get("level") or logging.INFO)
        name = str(message.get("logger") or "dtp.task")
        text = str(message.get("message") or "")
        if task is not None:
            task.on_log(level, name, text)
        else:
            logging.getLogger(name).log(level, text, extra=_fields(pid=self.pid))

    def _on_attempt_message(self, kind: str, message: Message) -> None:
        request_id = _request_id(message)
        if request_id < 0:
            self.fail("task process answered a request without a number")
            return
        task = self.attempts.get(request_id)
        if task is None:
            stop = self.stopping.get(request_id)
            if stop is not None and kind != "STARTED":
                self._stopped(request_id, stop, message.get("leftovers") is True)
            elif stop is None and self.live:
                self.fail(f"task process answered request {request_id} it was not running")
            return
        if kind == "STARTED":
            task.mark_started(self.pid)
            return
        del self.attempts[request_id]
        task.settle(_outcome(kind, message))
        self._after_attempt(message.get("leftovers") is True)

    def _stopped(self, request_id: int, stop: _Stop, leftovers: bool) -> None:
        del self.stopping[request_id]
        stop.timer.cancel()
        if not stop.waiter.done():
            stop.waiter.set_result("cooperative")
        self._after_attempt(leftovers)

    def _after_attempt(self, leftovers: bool) -> None:
        if leftovers and not self.shared:
            log.info(
                "the attempt left processes running: ending its task process's group",
                extra=_fields(pid=self.pid),
            )
            self.kill()  # the pool starts a fresh process once it is reaped
            return
        self.pool._freed(self)

    # ------------------------------------------------------------- the end

    def on_pipe_closed(self) -> None:
        """Nothing more can come from it: it ends (if it has not) and is reaped."""
        self.kill()

    async def _reap(self) -> None:
        if self._reaping:
            return  # its pipe closed and it was killed: one reaping is enough
        self._reaping = True
        code = self.proc.poll()
        if code is None:
            code = await asyncio.get_running_loop().run_in_executor(None, self.proc.wait)
        self.state = "exited"
        for transport in (self._writer, self._reader):
            if transport is not None:
                transport.close()  # a process outside the group may hold the pipe open
        for stop in self.stopping.values():
            stop.timer.cancel()
            if not stop.waiter.done():
                stop.waiter.set_result("terminated")
        self.stopping.clear()
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        tasks, self.attempts = list(self.attempts.values()), {}
        for task in tasks:
            task.settle(self._cut_off(how, len(tasks)))
        if not self.loaded.done():
            self.loaded.set_result(
                {"type": "EXITED", "problem": f"the process loading it exited with code {code}"}
            )
        if not self.exited.done():
            self.exited.set_result(None)
        self.pool._on_exit(self)

    def _cut_off(self, how: str, count: int) -> Outcome:
        """The outcome of an attempt still running when its process ended."""
        if not self.shared:
            return Outcome(
                success=False, error=self._ended_for or f"the task process {how} unexpectedly"
            )
        why = self._ended_for or (
            f"the task process it shared with {count - 1} other attempts {how} unexpectedly"
            if count > 1
            else f"its task process {how} unexpectedly"
        )
        return Outcome(success=False, error=why, requeue=True)


def _request_id(message: Message) -> int:
    """The attempt a message is about; -1 when it names none."""
    value = message.get("requestId")
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _outcome(kind: str, message: Message) -> Outcome:
    if kind == "SUSPENDED":
        suspend: dict[str, Any] = {
            key: message[key]
            for key in ("sleepMillis", "waitForJobId", "waitForSignal", "waitForEvent")
            if key in message
        }
        return Outcome(success=False, error="suspended", suspend=suspend)
    if kind == "SUCCEEDED":
        return Outcome(
            success=True,
            result=str(message.get("result", "")),
            result_format="json" if message.get("resultFormat") == "json" else "text",
        )
    return Outcome(
        success=False,
        error=str(message.get("error") or "task failed without an error message"),
        retryable=message.get("retryable") is not False,
        rate_limited=_rate_limited(message.get("rateLimited")),
    )


def _rate_limited(value: object) -> dict[str, Any] | None:
    """A FAILED message's ``rateLimited``, when it is one (the child made it so)."""
    if not isinstance(value, dict):
        return None
    after = value.get("retryAfterMillis")
    scope = value.get("scope")
    if isinstance(after, bool) or not isinstance(after, int) or scope not in RATE_LIMIT_SCOPES:
        return None
    return {"retryAfterMillis": after, "scope": scope}


def _fields(**values: Any) -> dict[str, Any]:
    return {"fields": values}
