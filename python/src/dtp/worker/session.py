"""The worker's session with its coordinator: one connection (made again
for as long as the worker runs), registration, heartbeats on it, refusals,
the leader ring; the attempts it is assigned are ``Attempt`` objects
(attempt.py) that run in the pool of task processes (pool.py), never in this
process.

Everything here runs on one asyncio event loop, which runs no task code and
never blocks; heartbeats are timed by a thread of their own, so nothing a
handler does (in its own process) can delay them.

Modes: ``disconnected`` -> ``connecting`` -> ``registering`` (WORKER_REGISTER
sent) -> ``registered`` (heartbeating, TASK_ASSIGN and TASK_CANCEL accepted) ->
``disconnected`` ...; any -> ``closed`` (final).

Negotiation, as docs/PROTOCOL.md says: an extension is used only when the
coordinator listed it in ``WORKER_REGISTERED.features`` (absent = none, a v1
coordinator). ``WORKER_DRAINING`` needs ``drain``, ``TASK_RESULT.retryable``
needs ``retryable``, ``TASK_RESULT.requeue`` needs ``requeue``,
``TASK_ASSIGN``'s deadline and attempt limit need ``assignLimits``, attempts
beyond the capacity need ``prefetch``, a capacity above 1,024 needs
``slots`` (without it the worker runs 1,024 attempts at once), judging the
coordinator by its silence needs ``heartbeatAck``, a handler's calls
(``ENQUEUE_CHILD``; ``RECORD_STEP``, ``GET_STEPS`` and ``TASK_SUSPEND``) need
``children`` and ``steps`` (without them the handler's ``ctx.enqueue`` /
``ctx.step`` raise ``UNSUPPORTED_FEATURE``), and ``--queues`` needs ``queues``
(without it the worker stops, exit 1). ``taskTypes``, ``heartbeatAck: true``,
``prefetch`` (when not 0), ``slots``, ``parents``, ``steps``, ``children``
and ``resultFormat`` are optional fields that a v1 peer ignores.

A refusal (``ERROR`` UNAUTHENTICATED, TLS_REQUIRED or WORKER_REPLACED, or a
TLS handshake that failed on a certificate or a peer without TLS) stops the
worker with exit code 1; every other end of a connection is followed by a
new dial. With several coordinators the worker follows the leader through
``NOT_LEADER`` (addresses.LeaderRing) and pauses only after a whole round
failed: ``reconnect_delay``, doubled for each further round that failed, up
to 16 times that (and at most 30 s), with a little jitter.

Attempts of a lost connection are orphans: their leases are revoked (or soon
will be). One that finishes before the worker registers again is reported
once it has, as a late result the coordinator logs and rejects; one still
running then is abandoned (its process told to stop), so the new session
starts with every slot free.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import ssl
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Callable

from ..addresses import HostPort, LeaderRing, parse_address_list
from ..framing import FrameTooLargeError, Message, ProtocolError
from ..protocol import (
    BUILTIN_TASK_TYPES,
    MAX_CAPACITY,
    NOT_LEADER,
    REFUSAL_CODES,
    expect_type,
    get_opt_str,
    get_str,
    parse_features,
)
from ..security import describe_os_error, describe_tls_error, is_tls_refusal, server_hostname
from .attempt import Assignment, Attempt, result_message, suspend_message
from .durable import CALL_FEATURES, MAX_CALLS_PER_ATTEMPT
from .link import Link
from .options import WorkerOptions
from .pool import TaskPool
from .pool_task import Outcome
from .timers import HeartbeatThread, Watchdog

log = logging.getLogger("dtp.worker")

COORDINATOR_MESSAGES = (
    "WORKER_REGISTERED",
    "TASK_ASSIGN",
    "TASK_CANCEL",
    "ERROR",
    "HEARTBEAT_ACK",
    "CHILD_ENQUEUED",
    "STEP_RECORDED",
    "STEPS",
)
CALL_REPLIES = ("CHILD_ENQUEUED", "STEP_RECORDED", "STEPS")
"""Answers to the calls of running attempts (each carries the call's ``requestId``)."""
LONGEST_PAUSE_MS = 30_000


def _fields(**values: Any) -> dict[str, Any]:
    return {"fields": values}


@dataclass
class _Call:
    """A call of a running attempt sent to the coordinator and not answered yet."""

    session: Link
    attempt: Attempt
    answer: Callable[[Message], None]


@dataclass
class _Late:
    job_id: str
    attempt_id: str
    outcome: Outcome


class Refused(Exception):
    """The coordinator refused this worker; no reconnect can fix it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Worker:
    def __init__(self, options: WorkerOptions, pool: TaskPool) -> None:
        self.options = options
        self.worker_id = options.worker_id
        self._pool = pool
        self._ring = LeaderRing(
            parse_address_list(options.coordinator_host, options.coordinator_port)
        )
        self._mode = "disconnected"
        self._session: Link | None = None
        self._attempts: dict[str, Attempt] = {}
        self._late: list[_Late] = []
        self._heartbeat: HeartbeatThread | None = None
        self._watchdog = Watchdog(options.silence_ms / 1000, self._on_silent)
        self._draining = False
        self._closing = False
        self._warned_slots = False
        self._refusal: Refused | None = None
        self._unreachable = False
        self._failed_rounds = 0
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._done = asyncio.Event()
        self._jobs: set[asyncio.Future[None]] = set()
        self._calls: dict[int, _Call] = {}
        self._next_request_id = 1
        """Of the calls: unique on every connection (one counter for the worker's life)."""

    def _background(self, job: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(job)
        self._jobs.add(task)
        task.add_done_callback(self._jobs.discard)

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def refusal(self) -> Refused | None:
        return self._refusal

    # --------------------------------------------------------------- running

    async def run(self) -> int:
        """Serves until closed; the exit code: 0, or 1 after a refusal."""
        self._loop_task = asyncio.ensure_future(self._connect_loop())
        try:
            await self._loop_task
        except asyncio.CancelledError:
            pass
        await self._done.wait()
        return 1 if self._refusal is not None else 0

    async def _connect_loop(self) -> None:
        while not self._closing and not self._draining:
            ended_session = await self._connect_and_serve()
            if self._closing or self._draining:
                break
            if ended_session:
                self._failed_rounds = 0
            if self._ring.should_pause():
                await self._pause()
        if not self._closing:
            await self.close()

    async def _pause(self) -> None:
        base = self.options.reconnect_delay_ms
        cap = max(base, min(LONGEST_PAUSE_MS, 16 * base))
        delay_ms = min(cap, base * 2 ** min(self._failed_rounds, 10))
        self._failed_rounds += 1
        delay = delay_ms * random.uniform(0.9, 1.1) / 1000
        self._wake.clear()
        try:
            await asyncio.wait_for(self._wake.wait(), delay)
        except asyncio.TimeoutError:
            pass

    async def _connect_and_serve(self) -> bool:
        """One dial and, if it worked, one session; True when a registered session ended."""
        address = self._ring.next()
        self._mode = "connecting"
        timeout = self.options.connect_timeout_ms / 1000
        tls = self.options.tls
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    address.host,
                    address.port,
                    ssl=tls,
                    server_hostname=server_hostname(address.host) if tls else None,
                    ssl_handshake_timeout=timeout if tls else None,
                ),
                timeout,
            )
        except (OSError, asyncio.TimeoutError, ssl.SSLError, ValueError) as err:
            # ValueError: a host name no resolver takes (a label too long).
            self._mode = "disconnected"
            self._ring.failed()
            if tls is not None and is_tls_refusal(err):
                self._refuse("TLS_FAILED", f"{address}: {describe_tls_error(err)}")
            else:
                self._dial_failed(address, err)
            return False
        sock = writer.get_extra_info("socket")
        if isinstance(sock, socket.socket):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        session = Link(reader, writer, address, self.options.wire_capacity)
        self._session = session
        self._unreachable = False
        self._mode = "registering"
        log.info("connected", extra=_fields(coordinator=str(address)))
        register: Message = {
            "type": "WORKER_REGISTER",
            "workerId": self.worker_id,
            "capacity": self.options.wire_capacity,
            "taskTypes": self.options.task_types,
            "heartbeatAck": True,
            # Extensions a coordinator without them ignores (ctx.parents, ctx.step, ...).
            "parents": True,
            "steps": True,
            "children": True,
        }
        if self.options.queues is not None:
            register["queues"] = list(self.options.queues)
        if self.options.capacity > MAX_CAPACITY:
            register["slots"] = self.options.capacity
        if self.options.wire_prefetch:
            register["prefetch"] = self.options.wire_prefetch
        if self.options.auth_token is not None:
            register["authToken"] = self.options.auth_token
        session.send(register)
        reason = await self._serve(session)
        was_registered = session.registered
        self._on_closed(session, reason)
        return was_registered

    async def _serve(self, session: Link) -> str:
        """Reads and handles frames until the connection ends; the reason it ended."""
        registration_timeout = self.options.connect_timeout_ms / 1000
        try:
            while True:
                if session.registered:
                    message = await session.read()
                else:
                    try:
                        message = await asyncio.wait_for(session.read(), registration_timeout)
                    except asyncio.TimeoutError:
                        session.drop()
                        return f"no reply to WORKER_REGISTER within {registration_timeout:g} s"
                if message is None:
                    return "closed by the coordinator"
                self._watchdog.heard()
                try:
                    self._on_message(session, message)
                except ProtocolError as err:
                    session.drop()
                    return f"protocol error from coordinator ({err.code}): {err}"
                if session.closed:
                    return session.end_reason()
        except ProtocolError as err:
            session.drop()
            return f"protocol error from coordinator ({err.code}): {err}"
        except (OSError, ssl.SSLError) as err:
            session.drop()
            return f"connection failed: {describe_os_error(err)}"
        except asyncio.IncompleteReadError:
            session.drop()
            return "closed by the coordinator in the middle of a frame"
        except Exception as err:
            # A message this worker could not handle, for a reason none of the
            # above foresaw: it costs the connection (the worker dials again),
            # never the worker.
            log.exception("failed on a message from the coordinator: dropping the connection")
            session.drop()
            return f"failed on a message from the coordinator: {type(err).__name__}"

    def _dial_failed(self, address: HostPort, err: BaseException) -> None:
        reason = "timed out" if isinstance(err, asyncio.TimeoutError) else describe_os_error(err)
        if self._unreachable:
            log.debug(
                "connect attempt failed", extra=_fields(coordinator=str(address), reason=reason)
            )
            return
        self._unreachable = True
        log.warning(
            "coordinator unreachable; reconnecting until it is back",
            extra=_fields(
                coordinator=str(address), reason=reason, delayMs=self.options.reconnect_delay_ms
            ),
        )

    def _on_closed(self, session: Link, reason: str) -> None:
        if session is not self._session:
            return
        if not session.registered and not session.not_leader and self._refusal is None:
            self._ring.failed()
        session.flush()  # what this turn sent (results) goes, if the socket still takes it
        session.closed = True
        if not session.writer.is_closing():
            session.writer.close()
        self._session = None
        self._stop_heartbeat()
        self._watchdog.stop()
        self._fail_calls(session, "CONNECTION_LOST", f"the connection ended first ({reason})")
        if self._closing:
            return
        self._mode = "disconnected"
        log.warning(
            "connection lost", extra=_fields(reason=reason, orphanedTasks=len(self._attempts))
        )
        if not self._draining:
            log.info("reconnecting", extra=_fields(delayMs=self.options.reconnect_delay_ms))
        self._notify_if_idle()

    # -------------------------------------------------------------- messages

    def _on_message(self, session: Link, message: Message) -> None:
        kind = expect_type(message, COORDINATOR_MESSAGES)
        if kind in CALL_REPLIES or (kind == "ERROR" and message.get("requestId") is not None):
            self._on_call_answer(session, message)
        elif kind == "WORKER_REGISTERED":
            self._on_registered(session, message)
        elif kind == "TASK_ASSIGN":
            if not session.registered:
                raise ProtocolError("PROTOCOL_UNEXPECTED", "TASK_ASSIGN before WORKER_REGISTERED")
            self._on_assign(session, message)
        elif kind == "TASK_CANCEL":
            if not session.registered:
                raise ProtocolError("PROTOCOL_UNEXPECTED", "TASK_CANCEL before WORKER_REGISTERED")
            self._on_cancel(message)
        elif kind == "ERROR":
            self._on_error(session, message)
        # HEARTBEAT_ACK: heard, and that is all it says

    def _on_registered(self, session: Link, message: Message) -> None:
        if session.registered:
            raise ProtocolError("PROTOCOL_UNEXPECTED", "a second WORKER_REGISTERED")
        echoed = get_str(message, "workerId")
        if echoed != self.worker_id:
            log.warning("coordinator echoed another workerId", extra=_fields(registeredAs=echoed))
        session.features = parse_features(message.get("features"))
        if self.options.queues is not None and "queues" not in session.features:
            wanted = ",".join(self.options.queues)
            self._refuse(
                "UNSUPPORTED_FEATURE",
                f"this coordinator does not support queues (--queues {wanted} needs one that "
                "offers them)",
            )
            session.drop()
            return
        session.registered = True
        if self.options.capacity > MAX_CAPACITY:
            self._use_slots(session)
        self._mode = "registered"
        self._ring.succeeded()
        self._failed_rounds = 0
        self._start_heartbeat()
        if "heartbeatAck" in session.features:
            self._watchdog.start()
        features = ",".join(sorted(session.features)) or "none (v1 coordinator)"
        log.info(
            "registered",
            extra=_fields(
                coordinator=str(session.address),
                capacity=session.capacity,
                features=features,
                customTaskTypes=len(self.options.task_types) - len(BUILTIN_TASK_TYPES),
            ),
        )
        self._abandon(only_orphans=True)
        late, self._late = self._late, []
        for entry in late:
            log.info(
                "late result reported (its lease is probably revoked)",
                extra=_fields(jobId=entry.job_id, attemptId=entry.attempt_id),
            )
            self._send_result(session, entry.job_id, entry.attempt_id, entry.outcome)

    def _use_slots(self, session: Link) -> None:
        if "slots" in session.features:
            session.capacity = self.options.capacity
            return
        session.capacity = MAX_CAPACITY
        if not self._warned_slots:
            self._warned_slots = True
            log.warning(
                f"coordinator does not offer slots: running at most {MAX_CAPACITY} attempts "
                "at once",
                extra=_fields(capacity=self.options.capacity),
            )

    def _on_error(self, session: Link, message: Message) -> None:
        code = get_opt_str(message, "code")
        text = get_str(message, "message")
        if code in REFUSAL_CODES:
            assert code is not None
            self._refuse(code, text)
            return
        if code == NOT_LEADER:
            leader = get_opt_str(message, "leader")
            self._ring.not_leader(leader, self.options.coordinator_port)
            session.not_leader = True
            log.info(
                "not the leader; trying the next coordinator",
                extra=_fields(coordinator=str(session.address), leader=leader or "unknown"),
            )
            session.drop()
            return
        what = "error from coordinator" if session.registered else "registration refused"
        log.error(what, extra=_fields(message=text, code=code))
        session.drop()

    def _refuse(self, code: str, message: str) -> None:
        if self._refusal is not None or self._closing:
            return
        self._refusal = Refused(code, message)
        log.error(
            "refused by the coordinator: stopping (no reconnect)",
            extra=_fields(code=code, message=message),
        )
        self._background(self.close())

    def _on_assign(self, session: Link, message: Message) -> None:
        assignment = Assignment.read(message)
        job_id, attempt_id = assignment.job_id, assignment.attempt_id
        if attempt_id in self._attempts:
            log.warning(
                "duplicate assignment ignored", extra=_fields(jobId=job_id, attemptId=attempt_id)
            )
            return
        window = session.capacity + (
            self.options.wire_prefetch if "prefetch" in session.features else 0
        )
        refusal = (
            "worker is shutting down"
            if self._draining
            else "worker at capacity"
            if len(self._attempts) >= window
            else None
        )
        if refusal is not None:
            log.warning(
                f"task refused: {refusal}",
                extra=_fields(jobId=job_id, attemptId=attempt_id, capacity=session.capacity),
            )
            self._send_result(
                session, job_id, attempt_id, Outcome(success=False, error=refusal, retryable=True)
            )
            return
        attempt = Attempt(assignment, session, self._attempt_done)
        self._attempts[attempt_id] = attempt
        self._idle.clear()
        # Progress goes only to a coordinator that offered it; otherwise it stays here.
        progress = self._send_progress if "progress" in session.features else None
        attempt.start(
            self._pool,
            "assignLimits" in session.features,
            progress,
            session.features,
            self._on_call,
        )

    # ----------------------------------------------------------------- calls

    def _on_call(self, attempt: Attempt, call: Message, answer: Callable[[Message], None]) -> None:
        """A handler's call (ctx.step, ctx.enqueue, ...): sent with the attempt's ids and a
        fresh ``requestId``; its answer goes back to the handler."""

        def refuse(code: str, text: str) -> None:
            answer({"type": "ERROR", "code": code, "message": text})

        kind = call.get("type")
        feature = CALL_FEATURES.get(str(kind))
        session = self._session
        if feature is None:
            refuse("INVALID_REQUEST", f"{str(kind)[:40]} is not a call")
            return
        if session is None or session is not attempt.session or not session.registered:
            refuse("CONNECTION_LOST", "the attempt's connection ended")
            return
        if feature not in session.features:
            refuse("UNSUPPORTED_FEATURE", f'the coordinator does not offer "{feature}"')
            return
        open_calls = sum(1 for c in self._calls.values() if c.attempt is attempt)
        if open_calls >= MAX_CALLS_PER_ATTEMPT:
            refuse("TOO_MANY_CALLS", f"at most {MAX_CALLS_PER_ATTEMPT} calls wait at once")
            return
        request_id = self._next_request_id
        self._next_request_id += 1
        self._calls[request_id] = _Call(session, attempt, answer)
        try:
            session.send(
                {
                    **call,
                    "workerId": self.worker_id,
                    "jobId": attempt.job_id,
                    "attemptId": attempt.attempt_id,
                    "requestId": request_id,
                }
            )
        except FrameTooLargeError as err:
            del self._calls[request_id]
            refuse("LIMIT_EXCEEDED", str(err))

    def _on_call_answer(self, session: Link, message: Message) -> None:
        request_id = message.get("requestId")
        if not isinstance(request_id, int):
            return
        call = self._calls.get(request_id)
        if call is None or call.session is not session:
            return  # its attempt ended, or it was failed when a connection ended
        del self._calls[request_id]
        call.answer(message)

    def _fail_calls(self, session: Link, code: str, text: str) -> None:
        for request_id, call in list(self._calls.items()):
            if call.session is session:
                del self._calls[request_id]
                call.answer({"type": "ERROR", "code": code, "message": text})

    def _send_progress(self, attempt: Attempt, fraction: float, message: str | None) -> None:
        session = self._session
        if session is not attempt.session or session is None:
            return
        session.send(
            {
                "type": "TASK_PROGRESS",
                "workerId": self.worker_id,
                "jobId": attempt.job_id,
                "attemptId": attempt.attempt_id,
                "fraction": fraction,
                "message": message,
            }
        )

    def _attempt_done(self, attempt: Attempt, outcome: Outcome | None) -> None:
        """An attempt left ``running``: with an outcome to report, or None."""
        if self._attempts.get(attempt.attempt_id) is attempt:
            del self._attempts[attempt.attempt_id]
        for request_id, call in list(self._calls.items()):
            if call.attempt is attempt:
                del self._calls[request_id]  # nobody waits for its answer now
        if outcome is not None:
            session = self._session
            if session is attempt.session and session is not None and session.registered:
                self._send_result(session, attempt.job_id, attempt.attempt_id, outcome)
            elif not self._closing:
                self._late.append(_Late(attempt.job_id, attempt.attempt_id, outcome))
        self._notify_if_idle()

    def _send_result(self, session: Link, job_id: str, attempt_id: str, outcome: Outcome) -> None:
        if outcome.suspend is not None:
            session.send(suspend_message(self.worker_id, job_id, attempt_id, outcome.suspend))
            return
        message = result_message(self.worker_id, job_id, attempt_id, outcome, session.features)
        try:
            session.send(message)
        except FrameTooLargeError as err:
            session.send(
                {
                    "type": "TASK_RESULT",
                    "workerId": self.worker_id,
                    "jobId": job_id,
                    "attemptId": attempt_id,
                    "success": False,
                    "result": None,
                    "error": f"result could not be sent: {err}",
                }
            )

    def _on_cancel(self, message: Message) -> None:
        job_id = get_str(message, "jobId")
        attempt_id = get_str(message, "attemptId")
        log.info("cancel received", extra=_fields(jobId=job_id, attemptId=attempt_id))
        attempt = self._attempts.get(attempt_id)
        if attempt is None or attempt.job_id != job_id:
            log.info(
                "cancel ignored: no such running task",
                extra=_fields(jobId=job_id, attemptId=attempt_id),
            )
            return
        attempt.stop("cancel")

    def _abandon(self, only_orphans: bool = False) -> None:
        for attempt in list(self._attempts.values()):
            if only_orphans and attempt.session is self._session:
                continue
            attempt.abandon()
        if not only_orphans:
            self._late = []
        self._notify_if_idle()

    # ------------------------------------------------------------ heartbeats

    def _start_heartbeat(self) -> None:
        self._stop_heartbeat()
        self._heartbeat = HeartbeatThread(
            self.options.heartbeat_interval_ms / 1000, asyncio.get_running_loop(), self._beat
        )
        self._heartbeat.start()

    def _stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None

    def _beat(self) -> None:
        session = self._session
        if session is not None and session.registered:
            session.send({"type": "HEARTBEAT", "workerId": self.worker_id})

    def _on_silent(self, silent: float) -> None:
        session = self._session
        if session is not None:
            log.warning(
                "coordinator silent: dropping the connection",
                extra=_fields(silentMs=round(silent * 1000)),
            )
            session.drop()

    # ---------------------------------------------------------- stopping

    def _notify_if_idle(self) -> None:
        if not self._attempts or self._session is None or not self._session.registered:
            self._idle.set()

    def drain(self) -> None:
        """Takes no new task, lets running ones finish (for the drain timeout), then closes."""
        if self._draining or self._closing:
            return
        self._draining = True
        self._background(self._drain())

    async def _drain(self) -> None:
        session = self._session
        timeout = self.options.drain_timeout_ms / 1000
        if session is not None and session.registered:
            if "drain" in session.features:
                session.send({"type": "WORKER_DRAINING", "workerId": self.worker_id})
            else:
                log.info("coordinator does not offer drain: refusing new tasks instead")
        log.info(
            "draining: no new tasks",
            extra=_fields(
                runningTasks=len(self._attempts), timeoutMs=self.options.drain_timeout_ms
            ),
        )
        self._wake.set()
        self._notify_if_idle()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            log.info("drained: every task finished")
        except asyncio.TimeoutError:
            log.warning(
                "drain timed out; releasing what is left",
                extra=_fields(leftTasks=len(self._attempts)),
            )
        await self.close()

    async def close(self) -> None:
        """Stops everything: running attempts are abandoned, processes killed. Idempotent."""
        if self._closing:
            await self._done.wait()
            return
        self._closing = True
        self._mode = "closed"
        self._wake.set()
        self._stop_heartbeat()
        self._watchdog.stop()
        session = self._session
        self._abandon()
        if session is not None:
            session.flush()
            session.closed = True
            session.writer.close()
            try:
                await asyncio.wait_for(session.writer.wait_closed(), 2)
            except (OSError, asyncio.TimeoutError, ssl.SSLError):
                pass
        current = asyncio.current_task()
        if (
            self._loop_task is not None
            and self._loop_task is not current
            and not self._loop_task.done()
        ):
            self._loop_task.cancel()
        await self._pool.close()
        log.info("worker closed")
        self._done.set()
