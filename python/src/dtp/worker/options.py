"""What a worker is started with, and the bounds of each number: one table,
read by the command line (``cli.py``), ``WorkerOptions`` and the pool alike."""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass

from ..protocol import MAX_CAPACITY, MAX_PREFETCH_PER_SLOT, MAX_SLOTS
from .pool import MAX_PROCESSES

INT32_MAX = 2_147_483_647
MIN_DEFAULT_COORDINATOR_TIMEOUT_MS = 1000

BOUNDS: dict[str, tuple[int, int]] = {
    "coordinator_port": (1, 65_535),
    "capacity": (1, MAX_SLOTS),
    "processes": (1, MAX_PROCESSES),
    "prefetch": (0, MAX_PREFETCH_PER_SLOT * MAX_SLOTS),  # and at most 4 x capacity
    "heartbeat_interval_ms": (1, INT32_MAX),
    "reconnect_delay_ms": (1, INT32_MAX),
    "cancel_grace_ms": (0, INT32_MAX),
    "drain_timeout_ms": (0, INT32_MAX),
    "coordinator_timeout_ms": (1, INT32_MAX),
    "connect_timeout_ms": (1, INT32_MAX),
    "shard_refresh_ms": (1, INT32_MAX),
}
"""Each integer option's lowest and highest value."""


MAX_QUEUES_PER_WORKER = 1024
_QUEUE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")


def queues_problem(queues: list[str]) -> str | None:
    """Why a worker cannot take these queues, or None when it can."""
    if not 1 <= len(queues) <= MAX_QUEUES_PER_WORKER:
        return f"must name 1..{MAX_QUEUES_PER_WORKER} queues, got {len(queues)}"
    for name in queues:
        if _QUEUE_NAME.fullmatch(name) is None:
            return f"must each match {_QUEUE_NAME.pattern}, got {name[:80]!r}"
    return None


def wire_capacity(capacity: int) -> int:
    """``WORKER_REGISTER.capacity`` of a capacity: itself, or 1,024 with ``slots`` beside it."""
    return min(capacity, MAX_CAPACITY)


def wire_prefetch(capacity: int, prefetch: int) -> int:
    """``WORKER_REGISTER.prefetch``: what a coordinator without ``slots`` accepts too (at
    most 4 x 1,024), as the registration goes out before the features are known."""
    return min(prefetch, MAX_PREFETCH_PER_SLOT * wire_capacity(capacity))


def bound_problem(name: str, value: int) -> str | None:
    """Why ``value`` cannot be option ``name``, or None when it can."""
    low, high = BOUNDS[name]
    if not low <= value <= high:
        return f"must be in {low}..{high}, got {value}"
    return None


@dataclass
class WorkerOptions:
    """A worker's settings (times in milliseconds). ``capacity`` counts the
    attempts it runs at once, shared and isolated together; above 1,024 it is
    registered as the ``slots`` extension. ``processes`` is the number of
    shared task processes (None: the CPU count)."""

    worker_id: str
    task_types: list[str]
    coordinator_host: str = "localhost"
    coordinator_port: int = 7070
    capacity: int = 4
    processes: int | None = None
    prefetch: int | None = None
    heartbeat_interval_ms: int = 2000
    reconnect_delay_ms: int = 2000
    cancel_grace_ms: int = 1000
    drain_timeout_ms: int = 30_000
    coordinator_timeout_ms: int | None = None
    connect_timeout_ms: int = 5000
    shard_refresh_ms: int = 2000
    """With a sharded coordinator: how often the worker asks it for the shard map again
    (and at once when one of its shard sessions loses its connection)."""
    tls: ssl.SSLContext | None = None
    auth_token: str | None = None
    queues: list[str] | None = None
    """The named queues it takes attempts of (None: every queue)."""

    def __post_init__(self) -> None:
        if self.queues is not None:
            problem = queues_problem(self.queues)
            if problem is not None:
                raise ValueError(f"queues {problem}")
        for name in BOUNDS:
            value = getattr(self, name)
            problem = None if value is None else bound_problem(name, value)
            if problem is not None:
                raise ValueError(f"{name} {problem}")
        if self.prefetch is not None and self.prefetch > MAX_PREFETCH_PER_SLOT * self.capacity:
            raise ValueError(
                f"prefetch must be at most {MAX_PREFETCH_PER_SLOT} x capacity, got {self.prefetch}"
            )

    @property
    def effective_prefetch(self) -> int:
        return 2 * self.capacity if self.prefetch is None else self.prefetch

    @property
    def wire_capacity(self) -> int:
        """``WORKER_REGISTER.capacity`` of an unsharded worker (see ``wire_capacity``)."""
        return wire_capacity(self.capacity)

    @property
    def wire_prefetch(self) -> int:
        """``WORKER_REGISTER.prefetch`` of an unsharded worker (see ``wire_prefetch``)."""
        return wire_prefetch(self.capacity, self.effective_prefetch)

    @property
    def silence_ms(self) -> int:
        if self.coordinator_timeout_ms is not None:
            return self.coordinator_timeout_ms
        return max(3 * self.heartbeat_interval_ms, MIN_DEFAULT_COORDINATOR_TIMEOUT_MS)
