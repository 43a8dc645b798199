"""The worker's sharded mode (the ``Worker`` of worker.py has it).

A sharded coordinator (its public worker port answers the registration with
NOT_LEADER and the shard map) makes the worker *sharded*: it closes that
first session and opens one per worker address that leads some of its
shards (all shards, or its queues' shards), each a full session (session.py).
All of them share the one pool: it runs at most ``capacity`` attempts at
once and queues the rest. Each session registers a share of the capacity
and prefetch (shard_map.py: in proportion to the shards its address leads,
at least 1 each, so the shares may add up to more than ``capacity`` when
there are more sessions than slots). These sessions list what they hold
when they register (``heldAttempts``, and ``HELD_ATTEMPTS`` beyond what the
registration frame holds, where ``moreHeld`` is offered), and where the
coordinator offers ``reattach`` their orphans run on under the new
connection instead of being abandoned.

The map changes as shards move: every ``shard_refresh_ms``, and at once when
a session loses its connection, the worker asks for it again (LIST_SHARDS
on its own addresses, then those the last map named; shard_list.py). It
opens sessions to new addresses, registers again a session whose share
changed (a successor session registers beside it and replaces it, taking
its attempts over; only where the coordinator offers ``reattach``, or
nothing runs on it, so no attempt is lost), and closes sessions whose
address leads none of its shards now: one still registered first takes
nothing more (WORKER_DRAINING where offered) and lets its attempts finish
and report; one whose connection is gone hands its attempts to the session
that now serves their shard (the job id names it), whose registration lists
them as held, or lets them go when no session does.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Awaitable, Coroutine
from typing import Any

from ..shards import shard_of_job_id
from .lane import Lane
from .link import Link
from .options import WorkerOptions
from .pool import TaskPool
from .pool_task import Outcome
from .session import Session
from .shard_list import MapRefresher, ShardMapSource
from .shard_map import ShardPlan, Share, plan_shards, share_out

log = logging.getLogger("dtp.worker")


def _fields(**values: Any) -> dict[str, Any]:
    return {"fields": values}


class ShardedMode:
    """What the worker does with a sharded coordinator's map: its lanes opened,
    registered again, retired and closed as the map says."""

    options: WorkerOptions
    worker_id: str
    _pool: TaskPool
    _queues: list[str] | None
    """The named queues it takes from; None: every queue."""
    _lanes: list[Lane]
    """Every lane not closed yet."""
    _plan: ShardPlan | None
    """The shard map as this worker serves it; None while unsharded."""
    _refresher: MapRefresher | None
    _map_source: ShardMapSource
    _closing: bool
    _draining: bool

    @abstractmethod
    def _new_session(self, lane: Lane) -> Session: ...

    @abstractmethod
    def _queues_of(self, lane: Lane) -> list[str] | None: ...

    @abstractmethod
    def _report_late(self, lane: Lane, link: Link) -> None: ...

    @abstractmethod
    def _send_result(self, link: Link, job_id: str, attempt_id: str, outcome: Outcome) -> None: ...

    @abstractmethod
    def _notify_if_idle(self) -> None: ...

    @abstractmethod
    def _background(self, job: Coroutine[Any, Any, None]) -> None: ...

    def _on_shard_map(self, session: Session, shards: list[Any]) -> None:
        """A registration was answered NOT_LEADER with the shard map."""
        if self._closing or self._draining:
            return
        self._apply_map(shards, session.coordinator)

    async def _refresh_map(self, why: str) -> None:
        shard_list = await self._map_source.ask(why)
        if shard_list is None or self._closing or self._draining:
            return
        self._apply_map(shard_list.shards, shard_list.source)

    def _apply_map(self, infos: list[Any], source: str) -> None:
        """Acts on a map: a lane for each address that leads some of this worker's shards
        (new ones opened, changed shares registered again), the others closed."""
        plan = plan_shards(infos, self._queues, self.options.coordinator_port)
        if plan is None:
            log.warning("a shard map that names no shard: ignored", extra=_fields(source=source))
            return
        before, self._plan = self._plan, plan
        if before is None:
            log.info(
                "sharded coordinator: one session per shard leader",
                extra=_fields(
                    source=source, shards=plan.count, served=",".join(map(str, plan.served))
                ),
            )
            self._refresher = MapRefresher(self._refresh_map, self.options.shard_refresh_ms / 1000)
            self._refresher.start()
        live = {
            lane.address: lane
            for lane in self._lanes
            if not lane.retiring and lane.address is not None
        }
        shares = share_out(self.options.capacity, self.options.effective_prefetch, plan.routes)
        opened: list[Lane] = []
        reshared: list[tuple[Lane, Share]] = []
        for route, share in zip(plan.routes, shares):
            lane = live.get(route.address)
            if lane is None:
                lane = Lane(route.address, route.host_port, share, self._new_session)
                self._lanes.append(lane)
                opened.append(lane)
            else:
                reshared.append((lane, share))
            lane.shards = route.shards
        wanted = {route.address for route in plan.routes}
        for lane in list(self._lanes):
            if not lane.retiring and (lane.address is None or lane.address not in wanted):
                self._retire(lane)
        for lane, share in reshared:
            self._reshare(lane, share)
        for lane in opened:
            lane.session.start()
        self._fit_pool_queue()
        if before is None or before.key() != plan.key():
            sessions = [
                f"{r.address}={'+'.join(map(str, r.shards))}/{s.capacity}"
                for r, s in zip(plan.routes, shares)
            ]
            log.info(
                "shard map",
                extra=_fields(
                    source=source,
                    sessions=",".join(sessions),
                    unled=",".join(map(str, plan.unled)),
                ),
            )

    def _retire(self, lane: Lane) -> None:
        """A lane whose address leads none of this worker's shards now: closed at once when
        it holds nothing or cannot report, else it takes nothing more and closes once its
        attempts have reported."""
        lane.retiring = True
        self._drop_successor(lane)
        lane.session.stop_dialling()
        link = lane.link
        if link is None or not lane.registered or not (lane.attempts or lane.late):
            self._close_lane(lane)
            return
        if "drain" in link.features:
            link.send({"type": "WORKER_DRAINING", "workerId": self.worker_id})
        log.info(
            "session draining: its coordinator leads none of this worker's shards now",
            extra=_fields(coordinator=lane.session.coordinator, runningTasks=len(lane.attempts)),
        )

    def _close_lane(self, lane: Lane) -> None:
        """Closes a lane for good; what it still holds goes to the lanes of its shards."""
        if lane not in self._lanes:
            return
        self._lanes.remove(lane)
        lane.retiring = True
        self._drop_successor(lane)
        self._hand_on(lane)
        if lane.address is not None:
            log.info("session closed", extra=_fields(coordinator=lane.session.coordinator))
        self._background(_wait(lane.session.close()))
        self._fit_pool_queue()
        self._notify_if_idle()

    def _hand_on(self, lane: Lane) -> None:
        """A closing lane's attempts and unreported results go to the lane that now serves
        their shard (its job id names it): listed as held at its next registration, or
        reported now if it is registered. Those of no served shard are let go."""
        for attempt in list(lane.attempts.values()):
            if lane.attempts.get(attempt.attempt_id) is not attempt:
                continue  # moved or ended meanwhile (by a hand-on nested in this one)
            to = self._lane_for_job(attempt.job_id)
            if to is None:
                attempt.abandon()
                continue
            del lane.attempts[attempt.attempt_id]
            to.attempts[attempt.attempt_id] = attempt
            attempt.lane = to
        late, lane.late = lane.late, []
        for entry in late:
            to = self._lane_for_job(entry.job_id)
            link = None if to is None else to.link
            if to is None:
                log.info(
                    "late result dropped: no session serves its shard",
                    extra=_fields(jobId=entry.job_id),
                )
            elif link is not None and to.registered:
                self._send_result(link, entry.job_id, entry.attempt_id, entry.outcome)
            else:
                to.late.append(entry)

    def _lane_for_job(self, job_id: str) -> Lane | None:
        """The open lane that serves a job's shard, if any."""
        plan = self._plan
        if plan is None:
            return None
        shard = shard_of_job_id(job_id, plan.count)
        if shard is None:
            return None
        return next((x for x in self._lanes if not x.retiring and shard in x.shards), None)

    def _reshare(self, lane: Lane, share: Share) -> None:
        """A lane's new share: said by its next registration, or now by a successor that
        registers in its place while it still serves, if its coordinator can carry running
        attempts over (``reattach``) or none runs there. Registering the worker id again
        replaces the live session and hands the successor the leases its registration
        lists, where dropping the connection first would lose them. The session in force
        announces WORKER_DRAINING first (where offered), so that nothing more is assigned
        to it on the way."""
        lane.share = share
        sent = lane.registered_share
        link = lane.link
        # Not registered: its next registration says it. A successor under way: looked at
        # once it registered.
        if lane.retiring or link is None or not lane.registered or lane.successor is not None:
            return
        queues = self._queues_of(lane)
        if sent is None or (sent == share and lane.registered_queues == queues):
            return
        fields = _fields(
            coordinator=lane.session.coordinator,
            capacity=share.capacity,
            prefetch=share.prefetch,
            queues=None if queues is None else ",".join(queues),
        )
        if "reattach" not in link.features and lane.attempts:
            log.info("new share of capacity or queues: said at the next registration", extra=fields)
            return
        log.info("new share of capacity or queues: registering again", extra=fields)
        if "drain" in link.features:
            link.send({"type": "WORKER_DRAINING", "workerId": self.worker_id})
        successor = self._new_session(lane)
        lane.successor = successor
        lane.latest = successor
        successor.start()

    def _promote(self, lane: Lane, why: str) -> None:
        """The successor takes the place of the session in force, which closes."""
        successor = lane.successor
        if successor is None:
            return
        replaced = lane.session
        lane.session = successor
        lane.successor = None
        log.debug("session replaced", extra=_fields(coordinator=successor.coordinator, why=why))
        self._background(_wait(replaced.close()))

    def _drop_successor(self, lane: Lane) -> None:
        """A successor under way is not needed any more: the session in force reports what
        was kept for the successor."""
        successor = lane.successor
        if successor is None:
            return
        lane.successor = None
        self._background(_wait(successor.close()))
        link = lane.link
        if link is not None and lane.registered:
            self._report_late(lane, link)

    def _fit_pool_queue(self) -> None:
        """The pool's queue holds what the sessions may be sent beyond ``capacity``: their
        shares (registered and next) together may exceed it. Each lane's window bounds
        what it takes."""
        if self._plan is None:
            return
        held = 0
        for lane in self._lanes:
            sent = lane.registered_share or lane.share
            held += max(
                sent.capacity + sent.prefetch,
                lane.share.capacity + lane.share.prefetch,
                len(lane.attempts),
            )
        self._pool.queue_limit = max(self.options.effective_prefetch, held)


async def _wait(closing: Awaitable[None]) -> None:
    await closing
