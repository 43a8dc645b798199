"""One session of the worker with a coordinator: dial, register, heartbeat,
judge the coordinator's silence, and dial again when the connection ends,
for as long as the session lives. It knows nothing of attempts: what
arrives for them goes to its ``SessionHost`` (the worker), which also says
what to register with. An unsharded worker has one session; a worker of a
sharded coordinator one per shard leader's worker address (worker.py).

Modes (``mode``): ``disconnected`` -> ``connecting`` -> ``registering``
(WORKER_REGISTER sent) -> ``registered`` (heartbeating, TASK_ASSIGN and
TASK_CANCEL accepted) -> ``disconnected`` ...; any -> ``closed`` (final).

Everything here runs on one asyncio event loop, which runs no task code and
never blocks; heartbeats are timed by a thread of their own, so nothing a
handler does (in its own process) can delay them.

A refusal (``ERROR`` UNAUTHENTICATED, TLS_REQUIRED or WORKER_REPLACED, a TLS
handshake that failed on a certificate or a peer without TLS, a coordinator
without ``queues`` for a worker that names queues) goes to the host, which
stops the worker (exit code 1) unless it expected it; every other end of a
connection is followed by a new dial. With several coordinators the session
follows the leader through ``NOT_LEADER`` (addresses.LeaderRing) and pauses
only after a whole round failed: ``reconnect_delay``, doubled for each
further round that failed, up to 16 times that (and at most 30 s), with a
little jitter. A ``NOT_LEADER`` that carries ``shards`` (a sharded
coordinator's public worker port) hands the map to the host first, which
may close the session then and there.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, Callable

from ..addresses import HostPort, LeaderRing
from ..framing import Message, ProtocolError
from ..protocol import NOT_LEADER, REFUSAL_CODES, expect_type, get_opt_str, get_str, parse_features
from ..security import describe_os_error, describe_tls_error, is_tls_refusal
from .link import Link, dial
from .options import WorkerOptions
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


@dataclass(frozen=True)
class SessionHost:
    """What a session hands its worker, and asks of it."""

    registration: Callable[[], Message]
    """The fields of WORKER_REGISTER besides ``type`` and ``workerId`` (read at each one)."""
    on_registered: Callable[[Link], None]
    on_message: Callable[[Link, Message], None]
    """TASK_ASSIGN and TASK_CANCEL of a registered connection, and answers to calls."""
    on_disconnected: Callable[[Link, str], None]
    """A connection ended (with why); the session dials again unless it is closed."""
    on_refused: Callable[[str, str], None]
    """The coordinator refused this worker (code, message)."""
    on_shard_map: Callable[[list[Any]], None]
    """The registration was answered NOT_LEADER with the shard map: a sharded coordinator."""


class Session:
    def __init__(
        self, options: WorkerOptions, addresses: Sequence[HostPort], host: SessionHost
    ) -> None:
        self._options = options
        self._host = host
        self._ring = LeaderRing(addresses)
        self.mode = "disconnected"
        self.link: Link | None = None
        """The open connection, registered or not yet; None between connections."""
        self._heartbeat: HeartbeatThread | None = None
        self._watchdog = Watchdog(options.silence_ms / 1000, self._on_silent)
        self._unreachable = False
        self._failed_rounds = 0
        self._dialling = True
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed: asyncio.Future[None] | None = None

    @property
    def coordinator(self) -> str:
        """The coordinator talked to (or dialled next), as ``host:port``."""
        return str(self._ring.address)

    @property
    def registered(self) -> bool:
        return self.mode == "registered"

    @property
    def closed(self) -> bool:
        return self.mode == "closed"

    @property
    def features(self) -> frozenset[str]:
        """What the coordinator of the current connection offers (none before it registers)."""
        link = self.link
        return link.features if link is not None and link.registered else frozenset()

    def start(self) -> None:
        """Starts dialling in the background (once)."""
        if self._task is None and not self.closed:
            self._task = asyncio.ensure_future(self._run())

    def stop_dialling(self) -> None:
        """No more dials or reconnect pauses; the current connection stays."""
        self._dialling = False
        self._wake.set()

    def close(self) -> Awaitable[None]:
        """Ends the session for good: the connection is closed after what was sent, no
        more dials or heartbeats. Idempotent; the mode is ``closed`` at once."""
        if self._closed is None:
            self.mode = "closed"
            self.stop_dialling()
            self._stop_heartbeat()
            self._watchdog.stop()
            link = self.link
            if link is not None:
                link.close()
            self._closed = asyncio.ensure_future(self._finish_close(link))
        return self._closed

    async def _finish_close(self, link: Link | None) -> None:
        if link is not None:
            try:
                await asyncio.wait_for(link.writer.wait_closed(), 2)
            except (OSError, asyncio.TimeoutError, ssl.SSLError):
                pass
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait([task])

    # --------------------------------------------------------------- running

    async def _run(self) -> None:
        while self._dialling:
            ended_session = await self._connect_and_serve()
            if not self._dialling:
                break
            if ended_session:
                self._failed_rounds = 0
            if self._ring.should_pause():
                await self._pause()

    async def _pause(self) -> None:
        base = self._options.reconnect_delay_ms
        cap = max(base, min(LONGEST_PAUSE_MS, 16 * base))
        delay_ms = min(cap, base * 2 ** min(self._failed_rounds, 10))
        self._failed_rounds += 1
        delay = delay_ms * random.uniform(0.9, 1.1) / 1000
        self._wake.clear()
        if not self._dialling:
            return
        try:
            await asyncio.wait_for(self._wake.wait(), delay)
        except asyncio.TimeoutError:
            pass

    async def _connect_and_serve(self) -> bool:
        """One dial and, if it worked, one connection; True when a registered one ended."""
        address = self._ring.next()
        self.mode = "connecting"
        tls = self._options.tls
        try:
            reader, writer = await dial(address, self._options.connect_timeout_ms / 1000, tls)
        except (OSError, asyncio.TimeoutError, ssl.SSLError, ValueError) as err:
            # ValueError: a host name no resolver takes (a label too long).
            if self.closed:
                return False
            self.mode = "disconnected"
            self._ring.failed()
            if tls is not None and is_tls_refusal(err):
                self._host.on_refused("TLS_FAILED", f"{address}: {describe_tls_error(err)}")
            else:
                self._dial_failed(address, err)
            return False
        if not self._dialling:
            writer.close()
            return False
        link = Link(reader, writer, address)
        self.link = link
        self._unreachable = False
        self.mode = "registering"
        log.info("connected", extra=_fields(coordinator=str(address)))
        reason = "the session closed"
        try:
            link.send(
                {
                    "type": "WORKER_REGISTER",
                    "workerId": self._options.worker_id,
                    **self._host.registration(),
                }
            )
            reason = await self._serve(link)
        finally:
            self._on_closed(link, reason)
        return link.registered

    async def _serve(self, link: Link) -> str:
        """Reads and handles frames until the connection ends; the reason it ended."""
        registration_timeout = self._options.connect_timeout_ms / 1000
        try:
            while True:
                if link.registered:
                    message = await link.read()
                else:
                    try:
                        message = await asyncio.wait_for(link.read(), registration_timeout)
                    except asyncio.TimeoutError:
                        link.drop()
                        return f"no reply to WORKER_REGISTER within {registration_timeout:g} s"
                if message is None:
                    return link.end_reason() if link.closed else "closed by the coordinator"
                self._watchdog.heard()
                try:
                    self._on_message(link, message)
                except ProtocolError as err:
                    link.drop()
                    return f"protocol error from coordinator ({err.code}): {err}"
                if link.closed:
                    return link.end_reason()
        except ProtocolError as err:
            link.drop()
            return f"protocol error from coordinator ({err.code}): {err}"
        except (OSError, ssl.SSLError) as err:
            link.drop()
            return f"connection failed: {describe_os_error(err)}"
        except asyncio.IncompleteReadError:
            link.drop()
            return "closed by the coordinator in the middle of a frame"
        except Exception as err:
            # A message this worker could not handle, for a reason none of the
            # above foresaw: it costs the connection (the session dials again),
            # never the worker.
            log.exception("failed on a message from the coordinator: dropping the connection")
            link.drop()
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
                coordinator=str(address), reason=reason, delayMs=self._options.reconnect_delay_ms
            ),
        )

    def _on_closed(self, link: Link, reason: str) -> None:
        if link is not self.link:
            return
        if not link.registered and not link.not_leader:
            self._ring.failed()
        link.close()  # what this turn sent (results) goes, if the socket still takes it
        self.link = None
        self._stop_heartbeat()
        self._watchdog.stop()
        if not self.closed:
            self.mode = "disconnected"
        self._host.on_disconnected(link, reason)

    # -------------------------------------------------------------- messages

    def _on_message(self, link: Link, message: Message) -> None:
        kind = expect_type(message, COORDINATOR_MESSAGES)
        if kind in CALL_REPLIES or (kind == "ERROR" and message.get("requestId") is not None):
            self._host.on_message(link, message)
        elif kind == "WORKER_REGISTERED":
            self._on_registered(link, message)
        elif kind in ("TASK_ASSIGN", "TASK_CANCEL"):
            if not link.registered:
                raise ProtocolError("PROTOCOL_UNEXPECTED", f"{kind} before WORKER_REGISTERED")
            self._host.on_message(link, message)
        elif kind == "ERROR":
            self._on_error(link, message)
        # HEARTBEAT_ACK: heard, and that is all it says

    def _on_registered(self, link: Link, message: Message) -> None:
        if link.registered:
            raise ProtocolError("PROTOCOL_UNEXPECTED", "a second WORKER_REGISTERED")
        echoed = get_str(message, "workerId")
        if echoed != self._options.worker_id:
            log.warning("coordinator echoed another workerId", extra=_fields(registeredAs=echoed))
        link.features = parse_features(message.get("features"))
        queues = self._options.queues
        if queues is not None and "queues" not in link.features:
            wanted = ",".join(queues)
            self._host.on_refused(
                "UNSUPPORTED_FEATURE",
                f"this coordinator does not support queues (--queues {wanted} needs one that "
                "offers them)",
            )
            link.drop()
            return
        link.registered = True
        self.mode = "registered"
        self._ring.succeeded()
        self._failed_rounds = 0
        self._start_heartbeat()
        if "heartbeatAck" in link.features:
            self._watchdog.start()
        self._host.on_registered(link)

    def _on_error(self, link: Link, message: Message) -> None:
        code = get_opt_str(message, "code")
        text = get_str(message, "message")
        if code in REFUSAL_CODES:
            assert code is not None
            self._host.on_refused(code, text)
            return
        if code == NOT_LEADER:
            shards = message.get("shards")
            if isinstance(shards, list) and shards:
                log.info(
                    "the coordinator is sharded: registering with its shards instead",
                    extra=_fields(coordinator=str(link.address), shards=len(shards)),
                )
                self._host.on_shard_map(shards)
                if self.closed:
                    return  # the host closed it: no next coordinator to try
            leader = get_opt_str(message, "leader")
            self._ring.not_leader(leader, self._options.coordinator_port)
            link.not_leader = True
            log.info(
                "not the leader; trying the next coordinator",
                extra=_fields(coordinator=str(link.address), leader=leader or "unknown"),
            )
            link.drop()
            return
        what = "error from coordinator" if link.registered else "registration refused"
        log.error(what, extra=_fields(message=text, code=code))
        link.drop()

    # ------------------------------------------------------------ heartbeats

    def _start_heartbeat(self) -> None:
        self._stop_heartbeat()
        self._heartbeat = HeartbeatThread(
            self._options.heartbeat_interval_ms / 1000, asyncio.get_running_loop(), self._beat
        )
        self._heartbeat.start()

    def _stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None

    def _beat(self) -> None:
        link = self.link
        if link is not None and link.registered:
            link.send({"type": "HEARTBEAT", "workerId": self._options.worker_id})

    def _on_silent(self, silent: float) -> None:
        link = self.link
        if link is not None:
            log.warning(
                "coordinator silent: dropping the connection",
                extra=_fields(silentMs=round(silent * 1000), coordinator=str(link.address)),
            )
            link.drop()
