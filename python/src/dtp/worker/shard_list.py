"""Asking a sharded coordinator's public worker port for the shard map: a
connection of its own (never a session's), one ``LIST_SHARDS`` frame (with
the worker token as ``authToken`` where one is set), the ``SHARD_LIST`` it
answers, then closed. The addresses are tried in turn until one answers:
any of them knows the whole map, and one that is down or answers something
else (an ``ERROR``, a coordinator that does not take ``LIST_SHARDS`` there)
is passed over.

``ShardMapSource`` keeps the addresses to ask: the worker's own, then the
coordinators the last map named. ``MapRefresher`` says when to ask again:
every interval, and at once when told to (a session lost its connection);
one query at a time, and a request that comes during one runs another right
after it, so the map read last is never older than the latest reason to
look.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable

from ..addresses import AddressError, HostPort, parse_address_list
from ..framing import Message, ProtocolError
from ..protocol import text_of
from ..security import describe_os_error
from .link import Link, dial
from .options import WorkerOptions

log = logging.getLogger("dtp.worker")

_MAX_PROBLEM_CHARS = 300


@dataclass
class ShardListAnswer:
    """The map from the first address that gave one, and which it was; else why each failed."""

    shard_list: Message | None = None
    source: str = ""
    problems: list[str] = field(default_factory=list)


async def ask_shard_list(
    addresses: Sequence[HostPort],
    timeout_s: float,
    tls: ssl.SSLContext | None,
    auth_token: str | None,
) -> ShardListAnswer:
    """Asks each address in turn (``timeout_s`` for the dial, and as much for the answer)."""
    answer = ShardListAnswer()
    for address in addresses:
        try:
            answer.shard_list = await _ask_one(address, timeout_s, tls, auth_token)
            answer.source = str(address)
            return answer
        except asyncio.TimeoutError:
            answer.problems.append(f"{address}: no answer within {timeout_s:g} s")
        except asyncio.IncompleteReadError:
            answer.problems.append(f"{address}: closed in the middle of a frame")
        except (OSError, ssl.SSLError, ValueError, ProtocolError, _Refused) as err:
            what = describe_os_error(err) if isinstance(err, OSError) else str(err)
            answer.problems.append(f"{address}: {what[:_MAX_PROBLEM_CHARS]}")
    return answer


class _Refused(Exception):
    """The address answered something other than ``SHARD_LIST``."""


async def _ask_one(
    address: HostPort, timeout_s: float, tls: ssl.SSLContext | None, auth_token: str | None
) -> Message:
    reader, writer = await dial(address, timeout_s, tls)
    link = Link(reader, writer, address)
    try:
        request: Message = {"type": "LIST_SHARDS"}
        if auth_token is not None:
            request["authToken"] = auth_token
        link.send(request)
        reply = await asyncio.wait_for(link.read(), timeout_s)
    finally:
        link.close()
    if reply is None:
        raise _Refused("closed before SHARD_LIST")
    kind = reply.get("type")
    if kind == "SHARD_LIST" and isinstance(reply.get("shards"), list):
        return reply
    if kind == "ERROR":
        raise _Refused(f"ERROR {text_of(reply, 'code')}: {text_of(reply, 'message')}")
    raise _Refused(f"{str(kind)[:40]} instead of SHARD_LIST")


@dataclass(frozen=True)
class ShardList:
    shards: list[Any]
    """``SHARD_LIST.shards``: one entry per shard."""
    source: str
    """The address that answered."""


class ShardMapSource:
    """Where the worker asks for the map: its own addresses, then the coordinators the
    last map named (so that it finds the map when those it was given are gone)."""

    def __init__(self, own: Sequence[HostPort], options: WorkerOptions) -> None:
        self._own = list(own)
        self._options = options
        self._addresses = list(own)
        self._unreachable = False

    async def ask(self, why: str) -> ShardList | None:
        """The map, or None when no address gave one (logged once until one does)."""
        options = self._options
        answer = await ask_shard_list(
            self._addresses, options.connect_timeout_ms / 1000, options.tls, options.auth_token
        )
        if answer.shard_list is None:
            if not self._unreachable:
                log.warning(
                    "shard map: no coordinator answered",
                    extra={"fields": {"why": why, "problems": "; ".join(answer.problems)}},
                )
            self._unreachable = True
            return None
        self._unreachable = False
        coordinators = answer.shard_list.get("coordinators")
        if isinstance(coordinators, list):
            self._learn([c.get("workerAddress") for c in coordinators if isinstance(c, dict)])
        return ShardList(answer.shard_list["shards"], answer.source)

    def _learn(self, named: list[Any]) -> None:
        addresses = list(self._own)
        for text in named:
            if not isinstance(text, str):
                continue
            try:
                address = parse_address_list(text, self._options.coordinator_port)[0]
            except AddressError:
                continue  # not an address: nothing to ask there
            if address not in addresses:
                addresses.append(address)
        self._addresses = addresses


class MapRefresher:
    """Runs ``refresh(why)`` every ``interval_s`` and when asked (see the module comment)."""

    def __init__(self, refresh: Callable[[str], Awaitable[None]], interval_s: float) -> None:
        self._refresh = refresh
        self._interval_s = interval_s
        self._ticker: asyncio.Task[None] | None = None
        self._running: asyncio.Task[None] | None = None
        self._again: str | None = None
        self._stopped = False

    def start(self) -> None:
        """Starts the periodic queries (once)."""
        if self._stopped or self._ticker is not None:
            return
        self._ticker = asyncio.ensure_future(self._tick())

    async def _tick(self) -> None:
        while not self._stopped:
            await asyncio.sleep(self._interval_s)
            self.request("periodic")

    def request(self, why: str) -> None:
        """Asks now, or right after the query under way."""
        if self._stopped:
            return
        if self._running is not None:
            self._again = why
            return
        self._running = asyncio.ensure_future(self._run(why))

    async def _run(self, why: str | None) -> None:
        try:
            while why is not None and not self._stopped:
                try:
                    await self._refresh(why)
                except Exception:
                    log.exception("shard map refresh failed")
                why, self._again = self._again, None
        finally:
            self._running = None

    async def stop(self) -> None:
        """No more queries; the one under way (if any) is cancelled."""
        self._stopped = True
        tasks = [t for t in (self._ticker, self._running) if t is not None and not t.done()]
        for task in tasks:
            if task is not asyncio.current_task():
                task.cancel()
        others = [t for t in tasks if t is not asyncio.current_task()]
        if others:
            await asyncio.wait(others)
