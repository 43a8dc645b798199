"""What a worker makes of a sharded coordinator's shard map: which shards it
serves, which worker address leads each, and how its capacity and prefetch
are shared among the sessions it opens (one per distinct worker address).
Pure functions; the worker (``worker.py``) acts on what they say. They
compute what the TypeScript worker's do, number for number.

- Served shards: every shard, or, with ``queues``, the shard of each of its
  queues (``dtp.shards.shard_of_queue``), since a shard hands out only its
  own queues' attempts.
- A route is one worker address and the served shards it leads. A shard
  whose ``workerAddress`` is null (no coordinator leads it now) or not a
  ``host:port`` is unled: the worker waits for a later map.
- Shares: the worker's capacity C is split over its routes in proportion to
  the shards each leads (largest remainders, then at least 1 each, the one
  taken from the largest share; so the shares add up to C unless C is below
  the number of routes, when each gets 1). Prefetch is split the same way,
  without the floor, and each share is cut to what its capacity share may
  ask for (4 a slot, at most 4,096).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..addresses import AddressError, HostPort, parse_host_port
from ..protocol import MAX_CAPACITY, MAX_PREFETCH_PER_SLOT
from ..shards import MAX_SHARDS, shard_of_queue

MAX_PREFETCH = MAX_PREFETCH_PER_SLOT * MAX_CAPACITY
"""The most prefetch one registration may ask for."""


@dataclass(frozen=True)
class Share:
    """A session's part of the worker's capacity and prefetch."""

    capacity: int
    prefetch: int


@dataclass(frozen=True)
class ShardRoute:
    """One worker address and the shards this worker serves that it leads."""

    address: str
    """``host:port`` as the map gave it, normalised."""
    host_port: HostPort
    shards: tuple[int, ...]
    """Ascending."""


@dataclass(frozen=True)
class ShardPlan:
    """The shard map as one worker sees it."""

    count: int
    """Shards of the database."""
    served: tuple[int, ...]
    """The shards this worker takes work from, ascending."""
    routes: tuple[ShardRoute, ...]
    """Where each served shard that has a leader takes workers, in order of their first shard."""
    unled: tuple[int, ...]
    """Served shards that no coordinator leads now (or whose address is unusable)."""

    def key(self) -> tuple[object, ...]:
        """What of a plan matters for logging a change."""
        return (self.count, self.unled, tuple((r.address, r.shards) for r in self.routes))


def max_prefetch(capacity: int) -> int:
    """The most prefetch a registration of ``capacity`` may ask for."""
    return min(MAX_PREFETCH_PER_SLOT * capacity, MAX_PREFETCH)


def _known(infos: Sequence[Any]) -> dict[int, str | None]:
    """Each shard of the map in range, with its worker address (None: none usable)."""
    known: dict[int, str | None] = {}
    for info in infos:
        if not isinstance(info, dict):
            continue
        shard = info.get("shard")
        if isinstance(shard, bool) or not isinstance(shard, int) or not 0 <= shard < MAX_SHARDS:
            continue
        address = info.get("workerAddress")
        known[shard] = address if isinstance(address, str) else None
    return known


def _address_of(text: str | None, default_port: int) -> HostPort | None:
    if not text:
        return None
    try:
        return parse_host_port(text, default_port)
    except AddressError:
        return None


def plan_shards(
    infos: Sequence[Any], queues: Sequence[str] | None, default_port: int
) -> ShardPlan | None:
    """The plan for a map (``SHARD_LIST.shards``, or ``ERROR.shards``); None when it
    names no shard in range. ``default_port`` is the port of an address given without one."""
    by_shard = _known(infos)
    if not by_shard:
        return None
    # The map lists every shard; its highest number says how many there are.
    count = max(by_shard) + 1
    if queues is None:
        served = tuple(range(count))
    else:
        served = tuple(sorted({shard_of_queue(queue, count) for queue in queues}))
    routes: dict[str, tuple[HostPort, list[int]]] = {}
    unled: list[int] = []
    for shard in served:
        host_port = _address_of(by_shard.get(shard), default_port)
        if host_port is None:
            unled.append(shard)
            continue
        _, shards = routes.setdefault(str(host_port), (host_port, []))
        shards.append(shard)
    return ShardPlan(
        count=count,
        served=served,
        routes=tuple(
            ShardRoute(address, host_port, tuple(shards))
            for address, (host_port, shards) in routes.items()
        ),
        unled=tuple(unled),
    )


def split_share(total: int, weights: Sequence[int], least: int) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainders, earlier first on a
    tie), then raised to at least ``least`` each by taking from the largest share; when
    that cannot be done within ``total``, the shares add up to more."""
    if not weights:
        return []
    whole = sum(weights)
    if whole <= 0:
        return [least for _ in weights]
    # In floating point, as the TypeScript worker computes it: the same shares to the bit.
    exact = [total * weight / whole for weight in weights]
    shares = [math.floor(value) for value in exact]
    left = total - sum(shares)
    by_remainder = sorted(range(len(exact)), key=lambda i: (-(exact[i] - shares[i]), i))
    for i in by_remainder:
        if left <= 0:
            break
        shares[i] += 1
        left -= 1
    for i in range(len(shares)):
        while shares[i] < least:
            largest = max(range(len(shares)), key=lambda j: (shares[j], -j))
            if shares[largest] <= least:
                shares[i] = least
                break
            shares[largest] -= 1
            shares[i] += 1
    return shares


def share_out(capacity: int, prefetch: int, routes: Sequence[ShardRoute]) -> list[Share]:
    """Each route's share of the worker's ``capacity`` and ``prefetch`` (see the module
    comment)."""
    weights = [len(route.shards) for route in routes]
    capacities = split_share(capacity, weights, 1)
    prefetches = split_share(prefetch, weights, 0)
    return [
        Share(share, min(prefetches[i], max_prefetch(share))) for i, share in enumerate(capacities)
    ]
