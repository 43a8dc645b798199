"""The pool of task processes (``_child.py``), as the worker's event loop sees it.

- Up to ``capacity`` attempts run at once, each in a process of its own.
  Processes are started with the pool and reused from one attempt to the
  next; up to ``queue_limit`` attempts beyond that wait for a free one.
- ``stop(task, reason)`` preempts an attempt: it settles as cancelled at once
  (its slot is free and nothing it produces is ever reported), its process
  is told (``ctx.cancelled``), and it gets ``cancel_grace`` seconds to settle.
  A handler that does keeps its process for the next attempt; one that
  ignores it, or never yields, has its process killed (SIGKILL).
- A process that dies (``os._exit``, a crash, the OOM killer) fails its
  attempt with a message saying so; a fresh one takes its place.
- Each task process leads a process group (a session) of its own, and
  whatever its handlers start stays in it. Killing a task process kills its
  group, so nothing a handler started outlives a cancel, a deadline or the
  pool; and it is reaped at once, not when its pipe closes (a process that
  left the group may hold the pipe open). An attempt that ends with
  processes of its own still running (the task process says so) retires its
  task process the same way, and a fresh one takes its place. When the
  worker itself dies, each task process ends its group as its pipe closes.

Between a stop and the end of its grace the stopping process still exists
beside up to ``capacity`` live ones, so at most ``capacity`` + (attempts
stopped within the last grace) processes exist; a process beyond
``capacity`` is ended as soon as it is free.

Process states: ``starting`` (until it was sent INIT) -> ``idle`` -> ``busy`` ->
``idle`` ...; ``busy`` -> ``stopping`` (ABORT sent, grace running) -> ``idle`` or
``killed``; ``busy`` -> ``killed`` (its attempt left processes running); any ->
``exited`` (reaped).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Callable

from ..framing import FrameDecoder, Message, ProtocolError, encode_frame
from ._child import PIPE_FRAME_BYTES

log = logging.getLogger("dtp.worker")


@dataclass(frozen=True)
class Outcome:
    """How an attempt ended. A ``cancelled`` one is never reported."""

    success: bool
    result: str | None = None
    result_format: str = "text"
    error: str | None = None
    retryable: bool = True
    cancelled: bool = False


LogSink = Callable[[int, str, str], None]
"""Receives (level, logger name, message) of what a handler logged."""


class PoolTask:
    def __init__(self, request_id: int, run: bytes, on_log: LogSink) -> None:
        loop = asyncio.get_running_loop()
        self.on_settled: Callable[[], None] = lambda: None
        self.on_started: Callable[[int], None] = lambda pid: None
        """Told synchronously (before any line the handler logs is passed on)."""
        self.request_id = request_id
        self.run = run
        """Its RUN frame, encoded once when the attempt arrived."""
        self.on_log = on_log
        self.on_progress: Callable[[float, str | None], None] = lambda fraction, message: None
        """Told each ``ctx.progress`` of the handler."""
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

    def settle(self, outcome: Outcome) -> bool:
        if self.outcome.done():
            return False
        if not self.started.done():
            self.started.set_result(None)
        self.outcome.set_result(outcome)
        self.on_settled()
        return True


class _Reader(asyncio.Protocol):
    def __init__(self, child: TaskProcess) -> None:
        self._child = child
        self._decoder = FrameDecoder(PIPE_FRAME_BYTES)

    def data_received(self, data: bytes) -> None:
        try:
            messages = self._decoder.feed(data)
        except ProtocolError as err:
            self._child.fail(f"task process sent a malformed frame: {err}")
            return
        for message in messages:
            self._child.on_message(message)

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._child.on_pipe_closed()


class TaskProcess:
    """One child process running one attempt at a time."""

    def __init__(self, pool: TaskPool, proc: subprocess.Popen[bytes]) -> None:
        self.pool = pool
        self.proc = proc
        self.pid = proc.pid
        self.task: PoolTask | None = None
        self.state = "idle"
        self.exited: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.loaded: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._writer: asyncio.WriteTransport | None = None
        self._reader: asyncio.ReadTransport | None = None
        self._reaping = False
        self._stop_timer: asyncio.TimerHandle | None = None
        self._stop_waiter: asyncio.Future[str] | None = None
        self._crash: str | None = None

    @property
    def available(self) -> bool:
        return self.state == "idle"

    def attach(self, writer: asyncio.WriteTransport) -> None:
        self._writer = writer

    def attach_reader(self, reader: asyncio.ReadTransport) -> None:
        self._reader = reader

    def send(self, message: Message) -> None:
        self.write(encode_frame(message, PIPE_FRAME_BYTES))

    def write(self, frame: bytes) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write(frame)

    def run(self, task: PoolTask) -> None:
        assert self.available, "a task process runs one attempt at a time"
        self.task = task
        self.state = "busy"
        self.write(task.run)

    def stop(self, task: PoolTask, reason: str, grace: float) -> asyncio.Future[str]:
        """Fires the attempt's ``ctx.cancelled``; kills the process unless it settles in time.

        Resolves ``"cooperative"`` or ``"terminated"``.
        """
        waiter: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        if self.task is not task or self.state in ("killed", "exited"):

            def terminated(_: object) -> None:
                if not waiter.done():
                    waiter.set_result("terminated")

            self.exited.add_done_callback(terminated)
            return waiter
        self.state = "stopping"
        self._stop_waiter = waiter
        self._stop_timer = asyncio.get_running_loop().call_later(grace, self.kill)
        self.send({"type": "ABORT", "requestId": task.request_id, "reason": reason})
        return waiter

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

    def fail(self, reason: str) -> None:
        self._crash = self._crash or reason
        self.kill()

    def on_message(self, message: Message) -> None:
        kind = message.get("type")
        if kind in ("LOADED", "LOAD_FAILED"):
            if not self.loaded.done():
                self.loaded.set_result(message)
            return
        task = self.task
        if kind == "LOG":
            if task is not None and message.get("requestId") in (task.request_id, None):
                task.on_log(
                    int(message.get("level") or logging.INFO),
                    str(message.get("logger") or "dtp.task"),
                    str(message.get("message") or ""),
                )
            return
        if kind == "PROGRESS":
            if task is not None and message.get("requestId") == task.request_id:
                text = message.get("message")
                task.on_progress(
                    float(message.get("fraction") or 0), text if isinstance(text, str) else None
                )
            return
        if task is None or message.get("requestId") != task.request_id:
            if self.state in ("killed", "exited"):
                return
            self.fail(
                f"task process answered request {message.get('requestId')} it was not running"
            )
            return
        if kind == "STARTED":
            task.mark_started(self.pid)
        elif kind == "SUCCEEDED":
            self._finish(
                task,
                Outcome(
                    success=True,
                    result=str(message.get("result", "")),
                    result_format="json" if message.get("resultFormat") == "json" else "text",
                ),
                message.get("leftovers") is True,
            )
        elif kind == "FAILED":
            self._finish(
                task,
                Outcome(
                    success=False,
                    error=str(message.get("error") or "task failed without an error message"),
                    retryable=message.get("retryable") is not False,
                ),
                message.get("leftovers") is True,
            )
        else:
            self.fail(f"task process sent an unexpected {str(kind)[:40]}")

    def _finish(self, task: PoolTask, outcome: Outcome, leftovers: bool) -> None:
        if self.state in ("killed", "exited"):
            return
        self.task = None
        task.settle(outcome)  # no effect on a stopped task: it is settled already
        if self._stop_timer is not None:
            self._stop_timer.cancel()
            self._stop_timer = None
        waiter, self._stop_waiter = self._stop_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result("cooperative")
        if leftovers:
            log.info(
                "the attempt left processes running: ending its task process's group",
                extra={"fields": {"pid": self.pid}},
            )
            self.kill()  # the pool starts a fresh process once it is reaped
            return
        self.state = "idle"
        self.pool._on_idle(self)

    def on_pipe_closed(self) -> None:
        self.pool._background(self._reap())

    async def _reap(self) -> None:
        if self._reaping:
            return  # its pipe closed and it was killed: one reaping is enough
        self._reaping = True
        code = self.proc.poll()
        if code is None:
            code = await asyncio.get_running_loop().run_in_executor(None, self.proc.wait)
        self.state = "exited"
        if self._writer is not None:
            self._writer.close()
        if self._reader is not None:
            self._reader.close()  # a process outside the group may hold the pipe open
        if self._stop_timer is not None:
            self._stop_timer.cancel()
        waiter, self._stop_waiter = self._stop_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result("terminated")
        task, self.task = self.task, None
        if task is not None:
            how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
            task.settle(
                Outcome(success=False, error=self._crash or f"the task process {how} unexpectedly")
            )
        if not self.loaded.done():
            self.loaded.set_result(
                {"type": "EXITED", "problem": f"the process loading it exited with code {code}"}
            )
        if not self.exited.done():
            self.exited.set_result(None)
        self.pool._on_exit(self)


def _run_frame(run: Message) -> tuple[bytes, str | None]:
    """The RUN frame of an attempt, or why its payload cannot reach a task process.

    The pipe carries what JSON text cannot (an infinity, which is what a
    number like ``1e400`` decodes to), so the handler gets the payload as it
    was decoded; nesting beyond ``DEEP_JSON_LEVELS`` or a frame over
    ``PIPE_FRAME_BYTES`` fails the attempt, never the worker.
    """
    try:
        return encode_frame(run, PIPE_FRAME_BYTES, allow_nan=True), None
    except (ValueError, TypeError) as err:
        return b"", f"the payload cannot be passed to a task process: {err}"


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
        return self.pool._stop(self.task, reason)


class TaskPool:
    def __init__(
        self,
        capacity: int,
        modules: list[str],
        cancel_grace: float,
        queue_limit: int,
        log_level: int = logging.INFO,
    ) -> None:
        self.capacity = capacity
        self.cancel_grace = cancel_grace
        self.queue_limit = queue_limit
        self._init: Message = {
            "type": "INIT",
            "modules": list(modules),
            "sysPath": list(sys.path),
            "logLevel": log_level,
        }
        self._processes: list[TaskProcess] = []
        self._running: dict[int, TaskProcess] = {}
        self._queued: list[PoolTask] = []
        self._next_request = 1
        self._closing = False
        self._spawning = 0
        self._tasks: set[asyncio.Future[None]] = set()

    @property
    def process_count(self) -> int:
        return len(self._processes)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._processes]

    async def start(self) -> Message:
        """Starts the processes; returns what the first one said of the modules
        (``LOADED`` with ``taskTypes``, or ``LOAD_FAILED`` / ``EXITED`` with ``problem``)."""
        first = await self._spawn()
        answer = await first.loaded
        if answer.get("type") == "LOADED":
            for _ in range(self.capacity - 1):
                await self._spawn()
        return answer

    def run(self, run: Message, on_log: LogSink) -> TaskHandle:
        """Starts an attempt in a free process, or queues it (up to ``queue_limit``)."""
        request_id = self._next_request
        self._next_request += 1
        frame, problem = _run_frame({**run, "type": "RUN", "requestId": request_id})
        task = PoolTask(request_id, frame, on_log)
        handle = TaskHandle(task, self)
        if problem is not None:
            task.settle(Outcome(success=False, error=problem, retryable=False))
            return handle
        if self._closing:
            task.settle(Outcome(success=False, error="task pool is closed"))
            return handle
        full = len(self._running) >= self.capacity
        if full and len(self._queued) >= self.queue_limit:
            task.settle(Outcome(success=False, error=f"task pool at capacity ({self.capacity})"))
            return handle
        if full:
            self._queued.append(task)
        else:
            self._start(task)
        return handle

    def _start(self, task: PoolTask) -> None:
        process = self._take_idle()
        if process is None:
            self._queued.insert(0, task)
            self._ensure_processes()
            return
        self._running[task.request_id] = process

        def settled() -> None:
            self._running.pop(task.request_id, None)

        task.on_settled = settled
        process.run(task)

    def _ensure_processes(self) -> None:
        """Starts processes until there is one per slot (plus one per stopping process)."""
        if self._closing:
            return
        live = sum(1 for p in self._processes if p.state not in ("killed", "exited"))
        wanted = self.capacity + self._stopping_count()
        for _ in range(wanted - live - self._spawning):
            self._spawning += 1
            self._background(self._spawn_then_start())

    async def _spawn_then_start(self) -> None:
        try:
            if self._closing:
                return
            await self._spawn()
        finally:
            self._spawning -= 1
        self._start_queued()

    def _background(self, job: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(job)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _take_idle(self) -> TaskProcess | None:
        for process in self._processes:
            if process.available:
                return process
        return None

    def _stop(self, task: PoolTask, reason: str) -> asyncio.Future[str]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[str] = loop.create_future()
        process = self._running.pop(task.request_id, None)
        if task in self._queued:
            self._queued.remove(task)
        if task.settled and process is None:
            done.set_result("cooperative")
            return done
        task.settle(Outcome(success=False, error=f"task stopped ({reason})", cancelled=True))
        if process is None:
            done.set_result("cooperative")
            return done
        stopped = process.stop(task, reason, self.cancel_grace)
        self._start_queued()  # its slot is free at once; the stopping process is not
        return stopped

    def _on_idle(self, process: TaskProcess) -> None:
        live = [p for p in self._processes if p.state not in ("killed", "exited")]
        if self._closing or len(live) > self.capacity:
            process.kill()
            return
        self._start_queued()

    def _on_exit(self, process: TaskProcess) -> None:
        if process in self._processes:
            self._processes.remove(process)
        if self._closing:
            return
        live = [p for p in self._processes if p.state not in ("killed", "exited")]
        if len(live) < self.capacity:
            self._ensure_processes()

    def _start_queued(self) -> None:
        while not self._closing and len(self._running) < self.capacity and self._queued:
            if self._take_idle() is None:
                self._ensure_processes()
                return
            self._start(self._queued.pop(0))

    def _stopping_count(self) -> int:
        return sum(1 for p in self._processes if p.state == "stopping")

    async def _spawn(self) -> TaskProcess:
        loop = asyncio.get_running_loop()
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        env = dict(os.environ)
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join(
            [package_root, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        )
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "dtp.worker._child", str(to_child_r), str(from_child_w)],
                pass_fds=(to_child_r, from_child_w),
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # a process group of its own, for what it starts
            )
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        process = TaskProcess(self, proc)
        process.state = "starting"  # no attempt goes to it before its INIT
        self._processes.append(process)
        writer, _ = await loop.connect_write_pipe(
            asyncio.Protocol, os.fdopen(to_child_w, "wb", buffering=0)
        )
        process.attach(writer)
        process.send(self._init)
        reader, _ = await loop.connect_read_pipe(
            lambda: _Reader(process), os.fdopen(from_child_r, "rb", buffering=0)
        )
        process.attach_reader(reader)
        if process.state == "starting":
            process.state = "idle"
        return process

    async def close(self) -> None:
        """Cancels every attempt and kills every process. Idempotent."""
        self._closing = True
        for task in self._queued:
            task.settle(Outcome(success=False, error="task pool closed", cancelled=True))
        self._queued.clear()
        for process in list(self._processes):
            if process.task is not None:
                process.task.settle(
                    Outcome(success=False, error="task pool closed", cancelled=True)
                )
            process.kill()
        waits = [p.exited for p in self._processes]
        if waits:
            await asyncio.wait(waits, timeout=5)
