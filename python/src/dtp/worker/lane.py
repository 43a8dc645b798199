"""One of the worker's lanes: a session with a coordinator (session.py) and
what belongs to it alone: the attempts it was assigned (or handed), the
results it owes, its share of the worker's capacity, and the registration
in force. An unsharded worker has one lane; a worker of a sharded
coordinator one per shard leader's worker address (shard_map.py), all of
them running their attempts in the worker's one pool of task processes.

A lane's session may be replaced while it serves: a successor session
registers beside it with a new share and, once registered, takes its place
(the coordinator hands the successor the attempts its registration lists).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from ..addresses import HostPort
from ..framing import Message
from ..protocol import MAX_CAPACITY
from .held import split_held
from .link import Link
from .options import WorkerOptions, wire_capacity, wire_prefetch
from .pool_task import Outcome
from .shard_map import Share

if TYPE_CHECKING:
    from .attempt import Attempt
    from .session import Session


@dataclass
class Late:
    """An outcome no connection of its lane could take when it came."""

    job_id: str
    attempt_id: str
    outcome: Outcome


class Lane:
    def __init__(
        self,
        address: str | None,
        host_port: HostPort | None,
        share: Share,
        new_session: Callable[[Lane], Session],
    ) -> None:
        self.address = address
        """Its worker address in the shard map; None for the worker's own addresses."""
        self.host_port = host_port
        self.share = share
        """Its share of the worker's capacity and prefetch, as its next registration says it."""
        self.registered_share: Share | None = None
        """What the registration sent last said (the coordinator holds it to that)."""
        self.registered_queues: list[str] | None = None
        """The queues the registration sent last named (None: every queue)."""
        self.shards: tuple[int, ...] = ()
        """The shards it serves (none unsharded)."""
        self.attempts: dict[str, Attempt] = {}
        """Its attempts (running or orphaned) by attempt id, a part of the worker's."""
        self.late: list[Late] = []
        """Outcomes of its attempts that finished while it could not report them."""
        self.held_to_send: list[Message] | None = None
        """Held attempts its registration had no room for: sent in HELD_ATTEMPTS once
        registered."""
        self.retiring = False
        """Leads none of the worker's shards now: takes nothing new, closes once its
        attempts reported."""
        self.successor: Session | None = None
        """A session registering in its place, with a new share, while it still serves."""
        self.session = new_session(self)
        """The session in force: its connection is where its attempts report."""
        self.latest = self.session
        """The session made last for it: a WORKER_REPLACED to an earlier one is the
        replacement it asked for."""

    @property
    def lists_held(self) -> bool:
        """Its registrations list the attempts it holds (``heldAttempts``): the sessions
        with shards do; the worker's own session (unsharded) lists none."""
        return self.address is not None

    @property
    def link(self) -> Link | None:
        return self.session.link

    @property
    def registered(self) -> bool:
        return self.session.registered

    @property
    def features(self) -> frozenset[str]:
        return self.session.features

    def slots(self) -> int:
        """Attempts it runs at once as registered (1,024 where ``slots`` is not offered)."""
        capacity = (self.registered_share or self.share).capacity
        if capacity > MAX_CAPACITY and "slots" not in self.features:
            return MAX_CAPACITY
        return capacity

    def window(self) -> int:
        """Attempts it may hold under its registration: its slots, and the prefetch it
        registered where offered."""
        if "prefetch" not in self.features:
            return self.slots()
        share = self.registered_share or self.share
        return self.slots() + wire_prefetch(share.capacity, share.prefetch)

    def registration(self, options: WorkerOptions, queues: list[str] | None) -> Message:
        """WORKER_REGISTER's fields besides ``type`` and ``workerId`` for a session of this
        lane (read at each registration: what it holds changes); what they say becomes
        the registration in force."""
        share = self.share
        fields: Message = {
            "capacity": wire_capacity(share.capacity),
            "taskTypes": options.task_types,
            "heartbeatAck": True,
            # Extensions a coordinator without them ignores (ctx.parents, ctx.step, ...).
            "parents": True,
            "steps": True,
            "children": True,
        }
        if queues is not None:
            fields["queues"] = queues
        if share.capacity > MAX_CAPACITY:
            fields["slots"] = share.capacity
        prefetch = wire_prefetch(share.capacity, share.prefetch)
        if prefetch:
            fields["prefetch"] = prefetch
        if options.auth_token is not None:
            fields["authToken"] = options.auth_token
        if self.lists_held:
            register = {"type": "WORKER_REGISTER", "workerId": options.worker_id, **fields}
            listed, rest = split_held(register, self.held())
            fields["heldAttempts"] = listed
            if rest:
                fields["moreHeld"] = True
            self.held_to_send = rest or None
        self.registered_share = share
        self.registered_queues = queues
        return fields

    def held(self) -> list[Message]:
        """What it holds, as a registration lists it: attempts, then unreported results."""
        held: list[Message] = [
            {"jobId": a.job_id, "attemptId": a.attempt_id} for a in self.attempts.values()
        ]
        held += [{"jobId": late.job_id, "attemptId": late.attempt_id} for late in self.late]
        return held
