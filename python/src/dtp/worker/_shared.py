"""A shared task process: many attempts at once, each an asyncio task on the
event loop of the main thread.

- The reader thread takes each RUN off the pipe and records the attempt (its
  ctx) before the loop starts it, so an ABORT that follows at once finds it;
  an ABORT sets ``ctx.cancelled`` from that thread, whatever the loop does,
  and cancels the attempt's asyncio task on the loop.
- What the loop sends in one turn (STARTED, results, log lines, progress)
  leaves in one write, as a BATCH; the latest progress of an attempt in a turn
  replaces the one before it there.
- Every ``ALIVE_INTERVAL_S`` the loop says it turns (ALIVE). A handler that
  blocks the loop (a sync call in an ``async def``) stops that, and the worker
  places new attempts elsewhere meanwhile.
- When it runs no attempt and a handler's process still runs, it says so
  (LEFTOVERS): the worker then ends this process and its group.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from ..framing import Message
from ..tasks import TaskContext
from ._child import (
    Catalog,
    Channel,
    UnknownTaskType,
    answer,
    children_running,
    current_request,
    encode,
    failed,
    failure,
    new_context,
    poisoned,
    read_until_closed,
    suspended,
)
from .durable import AttemptDurable, CallPort
from .pipe import ALIVE_INTERVAL_S

log = logging.getLogger("dtp.worker.task_process")
_ALIVE = encode({"type": "ALIVE"})
_LEFTOVERS = encode({"type": "LEFTOVERS"})


class _Attempt:
    def __init__(self, request_id: int, ctx: TaskContext, run: Message) -> None:
        self.request_id = request_id
        self.ctx = ctx
        self.run = run
        self.task: asyncio.Task[None] | None = None
        self.durable: AttemptDurable | None = None
        self.ended = False


class SharedRunner:
    def __init__(self, channel: Channel, catalog: Catalog) -> None:
        self.channel = channel
        self.catalog = catalog
        self._loop = asyncio.new_event_loop()
        self._loop_thread: int | None = None
        self._lock = threading.Lock()
        self._attempts: dict[int, _Attempt] = {}
        self._outbox: list[bytes] = []
        self._progress_at: dict[int, int] = {}
        """Where the latest progress of an attempt waits in the outbox, this turn."""

    # -------------------------------------------------- sending, per turn

    def emit(self, message: Message) -> None:
        """Sends a message: with the turn's batch when on the loop, else at once."""
        if threading.get_ident() == self._loop_thread:
            self._post(encode(message))
        else:
            self.channel.send(message)

    def running(self) -> int | None:
        return None  # many attempts: a line from another thread is not tagged

    def _post(self, body: bytes) -> None:
        if not self._outbox:
            self._loop.call_soon(self._flush)
        self._outbox.append(body)

    def _progress(self, request_id: int, fraction: float, text: str | None) -> None:
        message: Message = {
            "type": "PROGRESS",
            "requestId": request_id,
            "fraction": fraction,
            "message": text,
        }
        if threading.get_ident() != self._loop_thread:
            self.channel.send(message)
            return
        at = self._progress_at.get(request_id)
        if at is not None:
            self._outbox[at] = encode(message)
            return
        self._progress_at[request_id] = len(self._outbox)
        self._post(encode(message))

    def _flush(self) -> None:
        bodies, self._outbox = self._outbox, []
        self._progress_at.clear()
        if bodies:
            self.channel.send_bodies(bodies)

    def _alive(self) -> None:
        self._post(_ALIVE)
        self._loop.call_later(ALIVE_INTERVAL_S, self._alive)

    # --------------------------------------------------- the reader thread

    def read_requests(self) -> None:
        def each(message: Message) -> None:
            kind = message.get("type")
            if kind == "ABORT":
                self._abort(message)
            elif kind == "RUN":
                attempt = self._record(message)
                self._loop.call_soon_threadsafe(self._start, attempt)
            elif kind == "ANSWER":
                self._answer(message)

        read_until_closed(self.channel, each)

    def _record(self, message: Message) -> _Attempt:
        request_id = int(message["requestId"])
        holder: list[_Attempt] = []

        def on_suspend(suspension: Message) -> None:
            # On the loop, inside the handler's task: it ends now, the task is dropped.
            attempt = holder[0]
            self._end(attempt, suspended(request_id, suspension))
            if attempt.task is not None:
                attempt.task.cancel()

        durable = AttemptDurable(CallPort(request_id, self.emit), message, on_suspend)
        ctx = new_context(
            message, lambda fraction, text: self._progress(request_id, fraction, text), durable
        )
        attempt = _Attempt(request_id, ctx, message)
        attempt.durable = durable
        holder.append(attempt)
        with self._lock:
            self._attempts[request_id] = attempt
        return attempt

    def _answer(self, message: Message) -> None:
        request_id = message.get("requestId")
        with self._lock:
            attempt = self._attempts.get(request_id) if isinstance(request_id, int) else None
        if attempt is not None and attempt.durable is not None:
            attempt.durable.calls.deliver(int(message["callId"]), message["reply"])

    def _abort(self, message: Message) -> None:
        request_id = message.get("requestId")
        with self._lock:
            attempt = self._attempts.get(request_id) if isinstance(request_id, int) else None
            if attempt is None:
                return
            attempt.ctx._cancel(str(message.get("reason", "cancel")))
            task = attempt.task
        if task is not None:
            self._loop.call_soon_threadsafe(task.cancel)

    # ------------------------------------------------------------ the loop

    def serve(self) -> None:
        self._loop_thread = threading.get_ident()
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(self._alive)
        while True:
            try:
                self._loop.run_forever()
            except (SystemExit, KeyboardInterrupt) as err:
                # Raised by a task a handler started (its own attempt's is caught):
                # the loop goes on for the other attempts.
                log.warning("a task of a handler raised %s: ignored", type(err).__name__)

    def _start(self, attempt: _Attempt) -> None:
        with self._lock:
            if not attempt.ctx.cancelled.is_set():
                # Its first step runs before any cancel the reader thread asks for
                # from now on (the loop runs callbacks in order).
                attempt.task = self._loop.create_task(self._run(attempt))
                return
        self._end(attempt, failed(attempt.request_id, "stopped before it started", True))

    async def _run(self, attempt: _Attempt) -> None:
        current_request.set(attempt.request_id)  # this task's context only
        self._end(attempt, await self._attempt(attempt))

    def _end(self, attempt: _Attempt, done: Message) -> None:
        if attempt.ended:
            return  # suspended already: what its task did after is not reported
        attempt.ended = True
        with self._lock:
            del self._attempts[attempt.request_id]
            idle = not self._attempts
        self._post(encode(done))
        if idle and children_running():
            self._post(_LEFTOVERS)

    async def _attempt(self, attempt: _Attempt) -> Message:
        request_id = attempt.request_id
        run = attempt.run
        try:
            handler, payload = self.catalog.resolve(
                str(run["taskType"]), run.get("payload"), shared=True
            )
            if attempt.ctx.cancelled.is_set():
                return failed(request_id, "stopped before it started", retryable=True)
            self._post(encode({"type": "STARTED", "requestId": request_id}))
            # One turn of the loop first: this turn's batch (STARTED) leaves even
            # when the handler then blocks the loop.
            await asyncio.sleep(0)
            value: Any = handler(payload, attempt.ctx)
            if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
                value = await value
            return poisoned(request_id, attempt.durable) or answer(request_id, value)
        except UnknownTaskType as err:
            return failed(request_id, str(err), retryable=True)
        except BaseException as err:
            return poisoned(request_id, attempt.durable) or failure(request_id, err)
