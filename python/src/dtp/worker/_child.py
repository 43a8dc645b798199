"""One task process of the worker's pool (``python -m dtp.worker._child R W``).

It talks to the worker over two pipes (file descriptors ``R`` and ``W``); the
messages are listed in ``pipe.py``. Its ``INIT`` gives it a role:

- ``shared``: many attempts at once, each an asyncio task on the one event
  loop of the process's main thread (``_shared.py``): the ``async def``
  handlers that are not ``isolate=True``, and the short built-ins.
- ``isolated``: one attempt at a time on the main thread (``def`` handlers,
  ``isolate=True`` ones, ``PRIME_COUNT``); an ``async def`` one on an event
  loop kept for the life of the process.

In both, a reader thread takes requests off the pipe, so an ABORT reaches a
handler that never yields (``ctx.cancelled`` is set from that thread). When
the worker's end of the pipe closes (the worker exited, or was killed), the
process ends its process group at once (itself and whatever its handlers
started), whatever its handlers are doing.

The process leads a process group of its own (the worker starts it in a new
session). An isolated process reaps, after each attempt, the children that
ended and tells the worker (``leftovers``) when any still runs; a shared one
does so whenever it runs no attempt (``LEFTOVERS``). The worker then ends the
group. On Linux it is a child subreaper, so a process a handler's child left
behind (``sleep 60 &`` in a shell) is its child too and counted.

SIGINT and SIGTERM do nothing here: a service manager's SIGTERM for every
process of the service is the worker's to handle (it drains); the worker
stops a task process with SIGKILL. They are caught, not ignored, so programs
a handler runs, and processes it forks, get them as usual.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import queue
import signal
import sys
import threading
import traceback
from collections.abc import Mapping
from typing import Any, Callable

from ..builtin_tasks import BUILTIN_HANDLERS, BUILTIN_VALIDATORS, SHARED_BUILTINS
from ..framing import FrameDecoder, FrameTooLargeError, Message, ProtocolError
from ..protocol import truncate_error
from ..tasks import (
    InvalidPayloadError,
    RateLimited,
    TaskContext,
    TaskDeclaration,
    TaskModuleError,
    describe_exception,
    encode_result,
    is_retryable,
    load_task_modules,
    result_too_large,
)
from .durable import AttemptDurable, CallPort, parents_of
from .pipe import PIPE_FRAME_BYTES, batch_frames, encode_message, unbatch

current_request: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "dtp_request", default=None
)
"""The attempt whose code runs here (asyncio tasks keep their own), for log lines."""


class Channel:
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
        self.send_bodies([encode(message)])

    def send_bodies(self, bodies: list[bytes]) -> None:
        """Writes encoded messages, batched; leaves the process when the worker is gone."""
        with self._lock:
            for data in batch_frames(bodies):
                view = memoryview(data)
                while view:
                    try:
                        written = os.write(self._write_fd, view)
                    except BrokenPipeError:
                        os._exit(0)  # the worker is gone
                    view = view[written:]

    def read(self) -> list[Message] | None:
        """The messages of the next frame, or None at the end of the pipe."""
        while not self._pending:
            data = os.read(self._read_fd, 65536)
            if not data:
                return None
            self._pending.extend(self._decoder.feed(data))
        return [m for m in unbatch(self._pending.pop(0)) if isinstance(m, dict)]


def encode(message: Message) -> bytes:
    """A message to the worker, encoded; a result too large for the pipe fails its attempt."""
    try:
        return encode_message(message, allow_nan=False)
    except FrameTooLargeError as err:
        return encode_message(failed(message.get("requestId"), str(err), retryable=True))


class Catalog:
    """The task types this process runs: its modules' and the built-ins."""

    def __init__(self) -> None:
        self.tasks: dict[str, TaskDeclaration] = {}
        self.load_problem: str | None = None

    def load(self, modules: list[str]) -> Message:
        try:
            self.tasks = load_task_modules(modules)
        except TaskModuleError as err:
            self.load_problem = str(err)
            return {"type": "LOAD_FAILED", "module": err.module, "problem": err.problem}
        isolated = [d.name for d in self.tasks.values() if d.isolated]
        return {"type": "LOADED", "taskTypes": list(self.tasks), "isolated": isolated}

    def resolve(self, task_type: str, payload: Any, shared: bool) -> tuple[Callable[..., Any], Any]:
        """The handler and the payload it gets; raises what fails the attempt."""
        if self.load_problem is not None:
            raise RuntimeError(self.load_problem)
        declaration = self.tasks.get(task_type)
        if declaration is not None:
            return declaration.handler, _checked(declaration, payload)
        builtin = (SHARED_BUILTINS if shared else BUILTIN_HANDLERS).get(task_type)
        if builtin is None:
            known = ", ".join([*BUILTIN_HANDLERS, *self.tasks])
            raise UnknownTaskType(f"Unknown task type: {task_type[:80]!r} (known: {known})")
        BUILTIN_VALIDATORS[task_type](payload)
        return builtin, payload


class UnknownTaskType(Exception):
    """An attempt of a task type this process does not know (retryable: another worker may)."""


def new_context(
    message: Mapping[str, Any],
    progress: Callable[[float, str | None], None],
    durable: AttemptDurable | None = None,
) -> TaskContext:
    return TaskContext(
        job_id=str(message["jobId"]),
        attempt_id=str(message["attemptId"]),
        attempt_number=int(message["attemptNumber"]),
        max_attempts=message.get("maxAttempts"),
        deadline_at_ms=message.get("deadlineAtMs"),
        task_type=str(message["taskType"]),
        progress=progress,
        parents=parents_of(message),
        durable=durable,
    )


def suspended(request_id: int, suspension: Message) -> Message:
    """The SUSPENDED message of an attempt that sleeps or waits (``sleepMillis``,
    ``waitForJobId``, ``waitForSignal`` or ``waitForEvent``): the worker sends TASK_SUSPEND."""
    return {"type": "SUSPENDED", "requestId": request_id, **suspension}


def poisoned(request_id: int, durable: AttemptDurable | None) -> Message | None:
    """FAILED, not retryable, for an attempt whose replay went another way, else None."""
    poison = durable.steps.poison if durable is not None else None
    return None if poison is None else failed(request_id, poison, retryable=False)


def answer(request_id: int, value: Any) -> Message:
    """The SUCCEEDED message of a handler's value, or FAILED when it cannot be sent."""
    result, result_format = encode_result(value)
    too_large = result_too_large(result)
    if too_large is not None:
        return failed(request_id, too_large, retryable=True)
    return {
        "type": "SUCCEEDED",
        "requestId": request_id,
        "result": result,
        "resultFormat": result_format,
    }


def failure(request_id: int, err: BaseException) -> Message:
    """The FAILED message of what a handler (or its payload's check) raised."""
    if isinstance(err, SystemExit):
        return failed(request_id, f"the handler called sys.exit({err.code!r})", True)
    if isinstance(err, RateLimited):
        # Its wait and scope go as data: the worker sends them only to a coordinator
        # that offers rate limits; to another one it is this retryable failure.
        limited = failed(request_id, f"RATE_LIMITED: {err.message}", retryable=True)
        limited["rateLimited"] = {"retryAfterMillis": err.retry_after_ms, "scope": err.scope}
        return limited
    return failed(request_id, describe_exception(err), is_retryable(err))


class ForwardLogs(logging.Handler):
    """Sends the records logged in this process to the worker, tagged with the attempt."""

    def __init__(self, emit: Callable[[Message], None], running: Callable[[], int | None]) -> None:
        super().__init__()
        self._emit = emit
        self._running = running
        """The attempt to tag a line with when its thread does not say (an isolated
        process runs one at a time; a shared one cannot tell)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if record.exc_info:
                message += "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip()
            self._emit(
                {
                    "type": "LOG",
                    "requestId": getattr(record, "dtp_request_id", None)
                    or current_request.get()
                    or self._running(),
                    "level": record.levelno,
                    "logger": record.name,
                    "message": truncate_error(message),  # as the worker's own lines are cut
                }
            )
        except Exception:
            self.handleError(record)


class _Attempt:
    def __init__(self, request_id: int, ctx: TaskContext, durable: AttemptDurable) -> None:
        self.request_id = request_id
        self.ctx = ctx
        self.durable = durable
        self.async_task: asyncio.Task[Any] | None = None
        self.suspended: Message | None = None


class IsolatedRunner:
    """One attempt at a time, on the main thread."""

    def __init__(self, channel: Channel, catalog: Catalog) -> None:
        self.channel = channel
        self.catalog = catalog
        self.current: _Attempt | None = None
        self._lock = threading.Lock()
        self._requests: queue.Queue[Message | None] = queue.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None

    def emit(self, message: Message) -> None:
        self.channel.send(message)

    def running(self) -> int | None:
        attempt = self.current
        return attempt.request_id if attempt is not None else None

    # --------------------------------------------------- the reader thread

    def read_requests(self) -> None:
        def each(message: Message) -> None:
            if message.get("type") == "ABORT":
                self._abort(message)
            elif message.get("type") == "ANSWER":
                attempt = self.current
                if attempt is not None and attempt.request_id == message.get("requestId"):
                    attempt.durable.calls.deliver(int(message["callId"]), message["reply"])
            else:
                self._requests.put(message)

        read_until_closed(self.channel, each)

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
            if message.get("type") == "RUN":
                done = self._run(message)
                if children_running():
                    done["leftovers"] = True
                self.channel.send(done)

    def _run(self, message: Message) -> Message:
        request_id = int(message["requestId"])
        holder: list[_Attempt] = []

        def on_suspend(suspension: Message) -> None:
            attempt = holder[0]
            attempt.suspended = suspended(request_id, suspension)
            if attempt.async_task is not None:
                attempt.async_task.cancel()

        durable = AttemptDurable(CallPort(request_id, self.channel.send), message, on_suspend)
        ctx = new_context(
            message,
            lambda fraction, text: self.channel.send(
                {"type": "PROGRESS", "requestId": request_id, "fraction": fraction, "message": text}
            ),
            durable,
        )
        attempt = _Attempt(request_id, ctx, durable)
        holder.append(attempt)
        with self._lock:
            self.current = attempt
        token = current_request.set(request_id)
        try:
            done = self._attempt(attempt, str(message["taskType"]), message.get("payload"))
            return attempt.suspended or poisoned(request_id, durable) or done
        finally:
            current_request.reset(token)
            with self._lock:
                self.current = None

    def _attempt(self, attempt: _Attempt, task_type: str, payload: Any) -> Message:
        request_id = attempt.request_id
        try:
            handler, payload = self.catalog.resolve(task_type, payload, shared=False)
            if attempt.ctx.cancelled.is_set():
                return failed(request_id, "stopped before it started", retryable=True)
            self.channel.send({"type": "STARTED", "requestId": request_id})
            value = handler(payload, attempt.ctx)
            if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
                value = self._await(attempt, value)
            return answer(request_id, value)
        except UnknownTaskType as err:
            return failed(request_id, str(err), retryable=True)
        except BaseException as err:
            return failure(request_id, err)

    def _await(self, attempt: _Attempt, awaitable: Any) -> Any:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
        loop = self._loop
        task = loop.create_task(as_coroutine(awaitable))
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


def read_until_closed(channel: Channel, each: Callable[[Message], None]) -> None:
    """The reader thread's loop: ``each`` message until the worker's end closes,
    then the end of this process and its group."""
    try:
        while True:
            messages = channel.read()
            if messages is None:
                break
            for message in messages:
                each(message)
    except (OSError, ProtocolError, ValueError):
        pass
    except BaseException:
        # A request this process cannot read: it cannot go on either. The
        # worker fails its attempts and starts a fresh process.
        traceback.print_exc()
        os._exit(1)
    # The worker closed its end (or died): stop now, with all this process started.
    end_group()
    os._exit(0)


async def as_coroutine(awaitable: Any) -> Any:
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


def failed(request_id: object, error: str, retryable: bool) -> Message:
    return {
        "type": "FAILED",
        "requestId": request_id,
        "error": truncate_error(error),
        "retryable": retryable,
    }


def children_running() -> bool:
    """Reaps the children that ended; True when one still runs."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def end_group() -> None:
    """SIGKILL to this process's group (itself included), when it leads one."""
    if os.getpgrp() == os.getpid():
        os.killpg(0, signal.SIGKILL)


def _become_subreaper() -> None:
    """On Linux, orphans among this process's descendants become its children
    (so ``children_running`` sees them); elsewhere nothing."""
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
    channel = Channel(int(argv[1]), int(argv[2]))
    first = channel.read()
    init = first[0] if first else None
    if init is None or init.get("type") != "INIT":
        return 1
    sys.path[:] = [str(p) for p in init.get("sysPath") or sys.path]
    catalog = Catalog()
    if init.get("role") == "shared":
        from ._shared import SharedRunner

        runner: SharedRunner | IsolatedRunner = SharedRunner(channel, catalog)
    else:
        runner = IsolatedRunner(channel, catalog)
    root = logging.getLogger()
    root.handlers[:] = [ForwardLogs(runner.emit, runner.running)]
    root.setLevel(int(init.get("logLevel") or logging.INFO))
    channel.send(catalog.load([str(m) for m in init.get("modules") or []]))
    threading.Thread(target=runner.read_requests, name="dtp-requests", daemon=True).start()
    runner.serve()
    return 0


if __name__ == "__main__":
    # Run as the package's module, not as __main__: _shared.py imports this one,
    # and there must be one of everything (the context variable above).
    from dtp.worker._child import main as package_main

    sys.exit(package_main(sys.argv))
