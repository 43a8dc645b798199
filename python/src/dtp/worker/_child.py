"""One task process of the worker's pool (``python -m dtp.worker._child R W``).

It talks to the worker over two pipes (file descriptors ``R`` and ``W``) in
the framing of the wire protocol:

    worker -> child   INIT      task modules, import path, log level (first, once)
                      RUN       one attempt: requestId, taskType, payload, ids, limits
                      ABORT     requestId, reason: set ctx.cancelled (and cancel an
                                async handler's asyncio task)
    child -> worker   LOADED    the task names of the modules, or
                      LOAD_FAILED  the module and the problem (every RUN then fails)
                      STARTED   the payload passed its checks; the handler runs
                      LOG       a line the handler logged
                      PROGRESS  fraction, message: what the handler reported (ctx.progress)
                      SUCCEEDED result, resultFormat (checked against the size limit)
                      FAILED    error, retryable

Attempts run one at a time on the main thread; ``async def`` handlers run on
one event loop kept for the life of the process. A reader thread takes
requests off the pipe, so an ABORT reaches a handler that never yields. When
the worker's end of the pipe closes (the worker exited, or was killed), the
process ends its process group at once (itself and whatever its handlers
started), whatever its handler is doing.

The process leads a process group of its own (the worker starts it in a new
session). After each attempt it reaps the children that ended and tells the
worker (``leftovers``) when any still runs, and the worker then ends the
group. On Linux it is a child subreaper, so a process a handler's child left
behind (``sleep 60 &`` in a shell) is its child too and counted.

SIGINT and SIGTERM do nothing here: a service manager's SIGTERM for every
process of the service is the worker's to handle (it drains); the worker
stops a task process with SIGKILL. They are caught, not ignored, so programs
a handler runs, and processes it forks, get them as usual.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import signal
import sys
import threading
import traceback
from typing import Any, Callable

from ..builtin_tasks import BUILTIN_HANDLERS, BUILTIN_VALIDATORS
from ..framing import FrameDecoder, FrameTooLargeError, Message, ProtocolError, encode_frame
from ..protocol import truncate_error
from ..tasks import (
    InvalidPayloadError,
    TaskContext,
    TaskDeclaration,
    TaskModuleError,
    describe_exception,
    encode_result,
    is_retryable,
    load_task_modules,
    result_too_large,
)

PIPE_FRAME_BYTES = 8 * 1_048_576
"""Largest frame on the pipes (a payload is at most 1 MiB; a result is checked first)."""


class _Channel:
    def __init__(self, read_fd: int, write_fd: int) -> None:
        # Not passed on to the programs a handler runs.
        os.set_inheritable(read_fd, False)
        os.set_inheritable(write_fd, False)
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._lock = threading.Lock()
        # The worker passes payloads on as it decoded them, infinities included.
        self._decoder = FrameDecoder(PIPE_FRAME_BYTES, allow_nan=True)
        self._pending: list[Message] = []

    def send(self, message: Message) -> None:
        try:
            frame = encode_frame(message, PIPE_FRAME_BYTES)
        except FrameTooLargeError as err:
            frame = encode_frame(
                {
                    "type": "FAILED",
                    "requestId": message.get("requestId"),
                    "error": str(err),
                    "retryable": True,
                }
            )
        with self._lock:
            view = memoryview(frame)
            while view:
                try:
                    written = os.write(self._write_fd, view)
                except BrokenPipeError:
                    os._exit(0)  # the worker is gone
                view = view[written:]

    def read(self) -> Message | None:
        """The next message, or None at the end of the pipe."""
        while not self._pending:
            data = os.read(self._read_fd, 65536)
            if not data:
                return None
            self._pending.extend(self._decoder.feed(data))
        return self._pending.pop(0)


class _Attempt:
    def __init__(self, request_id: int, ctx: TaskContext) -> None:
        self.request_id = request_id
        self.ctx = ctx
        self.async_task: asyncio.Task[Any] | None = None


class _ForwardLogs(logging.Handler):
    """Sends the records logged in this process to the worker, tagged with the attempt."""

    def __init__(self, runner: _Runner) -> None:
        super().__init__()
        self._runner = runner

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if record.exc_info:
                message += "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip()
            message = truncate_error(message)  # as the worker's own lines are cut
            current = self._runner.current
            self._runner.channel.send(
                {
                    "type": "LOG",
                    "requestId": getattr(record, "dtp_request_id", None)
                    or (current.request_id if current else None),
                    "level": record.levelno,
                    "logger": record.name,
                    "message": message,
                }
            )
        except Exception:
            self.handleError(record)


class _Runner:
    def __init__(self, channel: _Channel) -> None:
        self.channel = channel
        self.tasks: dict[str, TaskDeclaration] = {}
        self.load_problem: str | None = None
        self.current: _Attempt | None = None
        self._lock = threading.Lock()
        self._requests: queue.Queue[Message | None] = queue.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None

    # --------------------------------------------------- the reader thread

    def read_requests(self) -> None:
        try:
            while True:
                message = self.channel.read()
                if message is None:
                    break
                if message["type"] == "ABORT":
                    self._abort(message)
                else:
                    self._requests.put(message)
        except (OSError, ProtocolError):
            pass
        except BaseException:
            # A request this process cannot read: it cannot go on either. The
            # worker fails its attempt and starts a fresh process.
            traceback.print_exc()
            os._exit(1)
        # The worker closed its end (or died): stop now, with all this process started.
        _end_group()
        os._exit(0)

    def _abort(self, message: Message) -> None:
        with self._lock:
            attempt = self.current
            if attempt is None or attempt.request_id != message.get("requestId"):
                return
            attempt.ctx._cancel(str(message.get("reason", "cancel")))
            task, loop = attempt.async_task, self._loop
        if task is not None and loop is not None:
            loop.call_soon_threadsafe(task.cancel)

    # ------------------------------------------------------ the main thread

    def serve(self) -> None:
        while True:
            message = self._requests.get()
            if message is None:
                return
            if message["type"] == "RUN":
                answer = self._run(message)
                if _children_running():
                    answer["leftovers"] = True
                self.channel.send(answer)

    def _run(self, message: Message) -> Message:
        request_id = int(message["requestId"])
        task_type = str(message["taskType"])
        ctx = TaskContext(
            job_id=str(message["jobId"]),
            attempt_id=str(message["attemptId"]),
            attempt_number=int(message["attemptNumber"]),
            max_attempts=message.get("maxAttempts"),
            deadline_at_ms=message.get("deadlineAtMs"),
            task_type=task_type,
            progress=lambda fraction, text: self.channel.send(
                {"type": "PROGRESS", "requestId": request_id, "fraction": fraction, "message": text}
            ),
        )
        attempt = _Attempt(request_id, ctx)
        with self._lock:
            self.current = attempt
        try:
            return self._attempt(attempt, task_type, message.get("payload"))
        finally:
            with self._lock:
                self.current = None

    def _attempt(self, attempt: _Attempt, task_type: str, payload: Any) -> Message:
        request_id = attempt.request_id
        try:
            if self.load_problem is not None:
                raise RuntimeError(self.load_problem)
            declaration = self.tasks.get(task_type)
            builtin = BUILTIN_HANDLERS.get(task_type)
            if declaration is None and builtin is None:
                known = ", ".join([*BUILTIN_HANDLERS, *self.tasks])
                return _failed(
                    request_id,
                    f"Unknown task type: {task_type[:80]!r} (known: {known})",
                    retryable=True,
                )
            handler: Callable[..., Any]
            if declaration is not None:
                payload = _checked(declaration, payload)
                handler = declaration.handler
            else:
                assert builtin is not None
                BUILTIN_VALIDATORS[task_type](payload)
                handler = builtin
            if attempt.ctx.cancelled.is_set():
                return _failed(request_id, "stopped before it started", retryable=True)
            self.channel.send({"type": "STARTED", "requestId": request_id})
            value = handler(payload, attempt.ctx)
            if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
                value = self._await(attempt, value)
            result, result_format = encode_result(value)
            too_large = result_too_large(result)
            if too_large is not None:
                return _failed(request_id, too_large, retryable=True)
            return {
                "type": "SUCCEEDED",
                "requestId": request_id,
                "result": result,
                "resultFormat": result_format,
            }
        except SystemExit as err:
            return _failed(request_id, f"the handler called sys.exit({err.code!r})", True)
        except BaseException as err:
            return _failed(request_id, describe_exception(err), is_retryable(err))

    def _await(self, attempt: _Attempt, awaitable: Any) -> Any:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
        loop = self._loop
        task = loop.create_task(_as_coroutine(awaitable))
        with self._lock:
            attempt.async_task = task
            cancelled = attempt.ctx.cancelled.is_set()
        if cancelled:
            task.cancel()
        try:
            return loop.run_until_complete(task)
        finally:
            with self._lock:
                attempt.async_task = None


async def _as_coroutine(awaitable: Any) -> Any:
    return await awaitable


def _checked(declaration: TaskDeclaration, payload: Any) -> Any:
    if declaration.schema is None:
        return payload
    try:
        checked = declaration.schema(payload)
    except Exception as err:
        detail = str(err).strip() or type(err).__name__
        raise InvalidPayloadError(detail) from err
    return payload if checked is None else checked


def _failed(request_id: int, error: str, retryable: bool) -> Message:
    return {
        "type": "FAILED",
        "requestId": request_id,
        "error": truncate_error(error),
        "retryable": retryable,
    }


def _children_running() -> bool:
    """Reaps the children that ended; True when one still runs."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def _end_group() -> None:
    """SIGKILL to this process's group (itself included), when it leads one."""
    if os.getpgrp() == os.getpid():
        os.killpg(0, signal.SIGKILL)


def _become_subreaper() -> None:
    """On Linux, orphans among this process's descendants become its children
    (so ``_children_running`` sees them); elsewhere nothing."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        pr_set_child_subreaper = 36
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _nothing(signum: int, frame: Any) -> None:
    """The handler of SIGINT and SIGTERM: the worker decides (see the module's doc)."""


def _default_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, _nothing)
    signal.signal(signal.SIGTERM, _nothing)
    # A fork (multiprocessing's, os.fork) gets the usual signals back; a program
    # run by exec gets them anyway, as a caught signal is reset by exec.
    os.register_at_fork(after_in_child=_default_signals)
    _become_subreaper()
    channel = _Channel(int(argv[1]), int(argv[2]))
    init = channel.read()
    if init is None or init.get("type") != "INIT":
        return 1
    sys.path[:] = [str(p) for p in init.get("sysPath") or sys.path]
    runner = _Runner(channel)
    root = logging.getLogger()
    root.handlers[:] = [_ForwardLogs(runner)]
    root.setLevel(int(init.get("logLevel") or logging.INFO))
    modules = [str(m) for m in init.get("modules") or []]
    try:
        runner.tasks = load_task_modules(modules)
        channel.send({"type": "LOADED", "taskTypes": list(runner.tasks)})
    except TaskModuleError as err:
        runner.load_problem = str(err)
        channel.send({"type": "LOAD_FAILED", "module": err.module, "problem": err.problem})
    threading.Thread(target=runner.read_requests, name="dtp-requests", daemon=True).start()
    runner.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
