"""The worker: its sessions with coordinators (session.py: dial, register,
heartbeat, dial again), each in a lane (lane.py) with the attempts it was
assigned, ``Attempt`` objects (attempt.py) that run in the pool of task
processes (pool.py), never in this process.

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

Attempts of a lost connection are orphans: their leases are revoked (or soon
will be). One that finishes before the worker registers again is reported
once it has, as a late result the coordinator logs and rejects; one still
running then is abandoned (its process told to stop), so the new session
starts with every slot free. (The sessions of a sharded coordinator list
their orphans when they register, and keep those the coordinator takes back.)

A sharded coordinator makes the worker *sharded*: one session per shard
leader, sessions that list what they hold when they register, and a map
it follows as shards move (sharded.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, Callable

from ..addresses import parse_address_list
from ..framing import FrameTooLargeError, Message
from ..protocol import BUILTIN_TASK_TYPES, MAX_CAPACITY, WORKER_REPLACED, get_str
from ..shards import shard_of_queue
from .attempt import Assignment, Attempt, result_message, suspend_message
from .calls import Calls
from .held import held_parts
from .lane import Lane, Late
from .link import Link
from .options import WorkerOptions
from .pool import TaskPool
from .pool_task import Outcome
from .session import Session, SessionHost
from .shard_list import MapRefresher, ShardMapSource
from .shard_map import ShardPlan, Share
from .sharded import ShardedMode

log = logging.getLogger("dtp.worker")

_MODE_RANK = ("registered", "registering", "connecting")
"""Session modes from the most to the least useful: a sharded worker shows its best."""


def _fields(**values: Any) -> dict[str, Any]:
    return {"fields": values}


class Refused(Exception):
    """The coordinator refused this worker; no reconnect can fix it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Worker(ShardedMode):
    def __init__(self, options: WorkerOptions, pool: TaskPool) -> None:
        self.options = options
        self.worker_id = options.worker_id
        self._pool = pool
        self._queues = None if options.queues is None else list(options.queues)
        self._own_addresses = parse_address_list(options.coordinator_host, options.coordinator_port)
        self._attempts: dict[str, Attempt] = {}
        """Running attempts by attempt id (the lease), orphans included; each also in its lane."""
        self._calls = Calls(options.worker_id)
        """Calls of running attempts sent to a coordinator and not answered yet."""
        self._draining = False
        self._closing = False
        self._warned_slots = False
        self._refusal: Refused | None = None
        self._idle = asyncio.Event()
        self._done = asyncio.Event()
        self._jobs: set[asyncio.Future[None]] = set()
        self._plan: ShardPlan | None = None
        """The shard map as this worker serves it; None while unsharded."""
        self._refresher: MapRefresher | None = None
        self._map_source = ShardMapSource(self._own_addresses, options)
        whole = Share(options.capacity, options.effective_prefetch)
        self._primary = Lane(None, None, whole, self._new_session)
        """The session with the worker's own addresses: the only one until a sharded
        coordinator answers it."""
        self._lanes: list[Lane] = [self._primary]
        """Every lane not closed yet: the primary, or (sharded) one per shard leader and
        the closing ones."""

    def _background(self, job: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(job)
        self._jobs.add(task)
        task.add_done_callback(self._jobs.discard)

    @property
    def mode(self) -> str:
        """Unsharded: the session's mode. Sharded: the best of its sessions' (registered if
        any is), ``disconnected`` while it has none."""
        if self._closing:
            return "closed"
        if self._plan is None:
            return self._primary.session.mode
        modes = {lane.session.mode for lane in self._lanes}
        return next((mode for mode in _MODE_RANK if mode in modes), "disconnected")

    @property
    def refusal(self) -> Refused | None:
        return self._refusal

    @property
    def sharded(self) -> bool:
        """True once a sharded coordinator answered: a session per shard leader."""
        return self._plan is not None

    @property
    def shard_plan(self) -> ShardPlan | None:
        return self._plan

    @property
    def lanes(self) -> list[Lane]:
        return list(self._lanes)

    # --------------------------------------------------------------- running

    async def run(self) -> int:
        """Serves until closed; the exit code: 0, or 1 after a refusal."""
        self._primary.session.start()
        await self._done.wait()
        return 1 if self._refusal is not None else 0

    def _new_session(self, lane: Lane) -> Session:
        """A session (not started) for ``lane``: its first, or a successor that registers in
        its place (see ``_reshare``)."""
        addresses = self._own_addresses if lane.host_port is None else [lane.host_port]
        host = SessionHost(
            registration=lambda: self._registration(lane),
            on_registered=lambda link: self._on_registered(lane, session, link),
            on_message=lambda link, message: self._on_message(lane, session, link, message),
            on_disconnected=lambda link, reason: self._on_disconnected(lane, session, link, reason),
            on_refused=lambda code, text: self._on_refused(lane, session, code, text),
            on_shard_map=lambda shards: self._on_shard_map(session, shards),
        )
        session = Session(self.options, addresses, host)
        return session

    def _registration(self, lane: Lane) -> Message:
        return lane.registration(self.options, self._queues_of(lane))

    def _queues_of(self, lane: Lane) -> list[str] | None:
        """The queues a session asks for: the worker's, or (sharded) those of its shards."""
        queues = self._queues
        if queues is None:
            return None
        plan = self._plan
        if plan is None or lane.address is None:
            return list(queues)
        mine = [q for q in queues if shard_of_queue(q, plan.count) in lane.shards]
        return mine or list(queues)

    def _on_registered(self, lane: Lane, session: Session, link: Link) -> None:
        if session is lane.successor:
            self._promote(lane, "its successor registered")
        if session is not lane.session:
            return
        slots = lane.slots()
        features = ",".join(sorted(link.features)) or "none (v1 coordinator)"
        where = {} if lane.address is None else {"shards": ",".join(map(str, lane.shards))}
        log.info(
            "registered",
            extra=_fields(
                coordinator=str(link.address),
                capacity=slots,
                features=features,
                customTaskTypes=len(self.options.task_types) - len(BUILTIN_TASK_TYPES),
                **where,
            ),
        )
        registered = lane.registered_share or lane.share
        if slots < registered.capacity and not self._warned_slots:
            self._warned_slots = True
            log.warning(
                f"coordinator does not offer slots: running at most {MAX_CAPACITY} attempts "
                "at once",
                extra=_fields(capacity=registered.capacity),
            )
        self._send_rest_of_held(lane, link)
        if lane.lists_held and "reattach" in link.features:
            self._adopt_orphans(lane, link)
        else:
            self._abandon(lane, only_orphans=True)
        self._report_late(lane, link)
        # The share changed while this registration was on its way.
        if lane.address is not None:
            self._reshare(lane, lane.share)

    def _send_rest_of_held(self, lane: Lane, link: Link) -> None:
        """The held attempts the registration had no room for: in HELD_ATTEMPTS parts to a
        coordinator that offers ``moreHeld``; to any other, revoked at the registration (it
        saw them not listed), so they are let go unreported."""
        rest, lane.held_to_send = lane.held_to_send, None
        if rest is None:
            return
        if "moreHeld" in link.features:
            parts = held_parts(rest)
            for i, part in enumerate(parts):
                link.send(
                    {
                        "type": "HELD_ATTEMPTS",
                        "workerId": self.worker_id,
                        "heldAttempts": part,
                        "more": i < len(parts) - 1,
                    }
                )
            log.info(
                "held attempts listed in parts", extra=_fields(held=len(rest), parts=len(parts))
            )
            return
        unlisted = {str(held["attemptId"]) for held in rest}
        lane.late = [late for late in lane.late if late.attempt_id not in unlisted]
        for attempt in list(lane.attempts.values()):
            if attempt.attempt_id in unlisted:
                attempt.abandon()
        log.warning(
            "this coordinator takes no held attempts beyond the registration: the unlisted "
            "ones are let go",
            extra=_fields(unlisted=len(rest)),
        )

    def _adopt_orphans(self, lane: Lane, link: Link) -> None:
        """The coordinator takes back the orphans whose lease is still current and cancels
        the others: every orphan of the lane now belongs to its new connection."""
        adopted = 0
        for attempt in lane.attempts.values():
            if attempt.link is not link:
                attempt.link = link
                adopted += 1
        if adopted:
            log.info("running tasks carried over to the new session", extra=_fields(tasks=adopted))

    def _report_late(self, lane: Lane, link: Link) -> None:
        late, lane.late = lane.late, []
        hope = (
            "counted if its lease is still current"
            if lane.lists_held and "reattach" in link.features
            else "its lease is probably revoked"
        )
        for entry in late:
            log.info(
                f"late result reported ({hope})",
                extra=_fields(jobId=entry.job_id, attemptId=entry.attempt_id),
            )
            self._send_result(link, entry.job_id, entry.attempt_id, entry.outcome)

    def _on_refused(self, lane: Lane, session: Session, code: str, message: str) -> None:
        if self._closing or session.closed:
            return
        if code == WORKER_REPLACED and self._replaced_on_purpose(lane, session):
            log.info(
                "replaced by a newer session of this worker",
                extra=_fields(coordinator=session.coordinator),
            )
            return  # the coordinator closes this connection next
        self._refuse(code, message)

    def _replaced_on_purpose(self, lane: Lane, session: Session) -> bool:
        """A newer session of this worker registered in this one's place: its lane's
        successor, or (sharded) another lane's session with the same coordinator, after a
        shard moved there."""
        if session is not lane.latest or lane.retiring:
            return True
        return self._plan is not None and any(
            other is not lane and other.session.coordinator == session.coordinator
            for other in self._lanes
        )

    def _refuse(self, code: str, message: str) -> None:
        if self._refusal is not None or self._closing:
            return
        self._refusal = Refused(code, message)
        log.error(
            "refused by the coordinator: stopping (no reconnect)",
            extra=_fields(code=code, message=message),
        )
        self._background(self.close())

    def _on_disconnected(self, lane: Lane, session: Session, link: Link, reason: str) -> None:
        self._calls.connection_lost(link, reason)
        if session is not lane.session:
            return  # a replaced session, or a successor that dials again
        if lane.successor is not None:
            # Its successor's registration lists what it held.
            self._promote(lane, f"the session it replaces ended ({reason})")
            return
        if self._closing:
            return
        if session.closed:
            # Closed by the worker: the lane's shards moved (its attempts moved on too).
            self._hand_on(lane)
            return
        where = {} if lane.address is None else {"coordinator": lane.address}
        log.warning(
            "connection lost",
            extra=_fields(**where, reason=reason, orphanedTasks=len(lane.attempts)),
        )
        if not self._draining and not lane.retiring:
            log.info("reconnecting", extra=_fields(delayMs=self.options.reconnect_delay_ms))
        if lane.retiring:
            self._close_lane(lane)  # nobody left to report to there
        elif self._refresher is not None:
            # Its shard may have moved, or its coordinator died: where are they now?
            self._refresher.request(f"a session lost its connection ({reason})")
        self._notify_if_idle()

    # -------------------------------------------------------------- messages

    def _on_message(self, lane: Lane, session: Session, link: Link, message: Message) -> None:
        kind = message["type"]
        if kind == "TASK_ASSIGN":
            if session is lane.session:
                self._on_assign(lane, link, message)
        elif kind == "TASK_CANCEL":
            self._on_cancel(lane, message)
        else:
            self._calls.settle(link, message)

    def _on_assign(self, lane: Lane, link: Link, message: Message) -> None:
        assignment = Assignment.read(message)
        job_id, attempt_id = assignment.job_id, assignment.attempt_id
        if attempt_id in self._attempts:
            log.warning(
                "duplicate assignment ignored", extra=_fields(jobId=job_id, attemptId=attempt_id)
            )
            return
        refusal = (
            "worker is shutting down"
            if self._draining
            else "this session is closing: its coordinator leads none of this worker's shards now"
            if lane.retiring
            else "worker at capacity"
            if len(lane.attempts) >= lane.window()
            else None
        )
        if refusal is not None:
            log.warning(
                f"task refused: {refusal}",
                extra=_fields(jobId=job_id, attemptId=attempt_id, capacity=lane.slots()),
            )
            self._send_result(
                link, job_id, attempt_id, Outcome(success=False, error=refusal, retryable=True)
            )
            return
        attempt = Attempt(assignment, link, lane, self._attempt_done)
        self._attempts[attempt_id] = attempt
        lane.attempts[attempt_id] = attempt
        self._idle.clear()
        # Progress goes only to a coordinator that offered it; otherwise it stays here.
        progress = self._send_progress if "progress" in link.features else None
        attempt.start(
            self._pool,
            "assignLimits" in link.features,
            progress,
            link.features,
            self._on_call,
        )

    def _on_cancel(self, lane: Lane, message: Message) -> None:
        job_id = get_str(message, "jobId")
        attempt_id = get_str(message, "attemptId")
        log.info("cancel received", extra=_fields(jobId=job_id, attemptId=attempt_id))
        attempt = self._attempts.get(attempt_id)
        if attempt is None or attempt.job_id != job_id or attempt.lane is not lane:
            log.info(
                "cancel ignored: no such running task",
                extra=_fields(jobId=job_id, attemptId=attempt_id),
            )
            return
        attempt.stop("cancel")

    # ----------------------------------------------------------------- calls

    def _on_call(self, attempt: Attempt, call: Message, answer: Callable[[Message], None]) -> None:
        """A handler's call: sent on its lane's connection, if that is the attempt's."""
        self._calls.send(attempt, attempt.lane.link, call, answer)

    def _send_progress(self, attempt: Attempt, fraction: float, message: str | None) -> None:
        link = attempt.lane.link
        if link is None or link is not attempt.link:
            return
        link.send(
            {
                "type": "TASK_PROGRESS",
                "workerId": self.worker_id,
                "jobId": attempt.job_id,
                "attemptId": attempt.attempt_id,
                "fraction": fraction,
                "message": message,
            }
        )

    # -------------------------------------------------------------- outcomes

    def _attempt_done(self, attempt: Attempt, outcome: Outcome | None) -> None:
        """An attempt left ``running``: with an outcome to report, or None."""
        lane = attempt.lane
        if self._attempts.get(attempt.attempt_id) is attempt:
            del self._attempts[attempt.attempt_id]
        if lane.attempts.get(attempt.attempt_id) is attempt:
            del lane.attempts[attempt.attempt_id]
        self._calls.forget(attempt)
        if outcome is not None:
            self._place_outcome(lane, attempt, outcome)
        self._left(lane)

    def _place_outcome(self, lane: Lane, attempt: Attempt, outcome: Outcome) -> None:
        """Reports an outcome on its lane's connection, or keeps it for the next one."""
        link = lane.link
        job_id, attempt_id = attempt.job_id, attempt.attempt_id
        if lane.successor is not None:
            # Registering again: the successor lists it or takes it over, and reports it.
            lane.late.append(Late(job_id, attempt_id, outcome))
        elif link is not None and link.registered and link is attempt.link:
            self._send_result(link, job_id, attempt_id, outcome)
        elif link is not None and link.registered and lane.lists_held:
            # Handed over from a closed lane: this connection never had it.
            log.info(
                "late result reported (a session closed with it)",
                extra=_fields(jobId=job_id, attemptId=attempt_id),
            )
            self._send_result(link, job_id, attempt_id, outcome)
        elif not self._closing:
            lane.late.append(Late(job_id, attempt_id, outcome))

    def _left(self, lane: Lane) -> None:
        """An attempt left ``lane``: a drain may be over, and a closing lane may close now."""
        self._notify_if_idle()
        if lane.retiring and not lane.attempts and not lane.late and not self._closing:
            self._close_lane(lane)

    def _send_result(self, link: Link, job_id: str, attempt_id: str, outcome: Outcome) -> None:
        if outcome.suspend is not None:
            link.send(suspend_message(self.worker_id, job_id, attempt_id, outcome.suspend))
            return
        message = result_message(self.worker_id, job_id, attempt_id, outcome, link.features)
        try:
            link.send(message)
        except FrameTooLargeError as err:
            link.send(
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

    def _abandon(self, lane: Lane, only_orphans: bool = False) -> None:
        """Lets a lane's running attempts (or only its orphans) go without ever reporting
        them; all of them also drop its unreported results."""
        current = lane.link
        for attempt in list(lane.attempts.values()):
            if only_orphans and attempt.link is current:
                continue
            attempt.abandon()
        if not only_orphans:
            lane.late = []
        self._notify_if_idle()

    # ---------------------------------------------------------- stopping

    def _notify_if_idle(self) -> None:
        """Told when no lane holds attempts it could report (a drain waits on this)."""
        if not any(lane.attempts and lane.registered for lane in self._lanes):
            self._idle.set()

    def drain(self) -> None:
        """Takes no new task, lets running ones finish (for the drain timeout), then closes."""
        if self._draining or self._closing:
            return
        self._draining = True
        self._background(self._drain())

    async def _drain(self) -> None:
        timeout = self.options.drain_timeout_ms / 1000
        if self._refresher is not None:
            await self._refresher.stop()
        for lane in self._lanes:
            if not lane.retiring:
                self._announce_drain(lane)
        log.info(
            "draining: no new tasks",
            extra=_fields(
                runningTasks=len(self._attempts), timeoutMs=self.options.drain_timeout_ms
            ),
        )
        for lane in self._lanes:
            self._drop_successor(lane)
            lane.session.stop_dialling()
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

    def _announce_drain(self, lane: Lane) -> None:
        """WORKER_DRAINING to a lane's coordinator, if it offers ``drain``."""
        link = lane.link
        if link is None or not link.registered:
            return
        if "drain" in link.features:
            link.send({"type": "WORKER_DRAINING", "workerId": self.worker_id})
        else:
            log.info("coordinator does not offer drain: refusing new tasks instead")

    async def close(self) -> None:
        """Stops everything: running attempts are abandoned, processes killed. Idempotent."""
        if self._closing:
            await self._done.wait()
            return
        self._closing = True
        sessions: list[Session] = []
        for lane in list(self._lanes):
            if lane.successor is not None:
                sessions.append(lane.successor)
                lane.successor = None
            sessions.append(lane.session)
            self._abandon(lane)
        # Every session closed at once: the end of one connection must promote nothing.
        closing = [session.close() for session in sessions]
        if self._refresher is not None:
            await self._refresher.stop()
        await asyncio.gather(*closing)
        await self._pool.close()
        log.info("worker closed")
        self._done.set()
