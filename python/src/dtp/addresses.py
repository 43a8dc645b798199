"""``host:port`` addresses, lists of them (``h1[:p1],h2[:p2]``), and the ring
that workers and clients walk to find the leading coordinator.

The ring hands out the next address to dial: the leader a standby named (once;
if it cannot be reached the list is used again), else the address at its
position. A failed dial or a NOT_LEADER without a name moves the position on;
a connection that worked keeps it. A caller pauses before dialling again only
after a working connection ended or a whole round failed (``should_pause``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


class AddressError(ValueError):
    """A malformed address or address list."""


@dataclass(frozen=True)
class HostPort:
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


_BRACKETED = re.compile(r"\[([^\]]+)\](?::(.*))?")


def parse_host_port(text: str, default_port: int) -> HostPort:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port``; the port defaults to ``default_port``."""
    trimmed = text.strip()
    port_text: str | None = None
    bracketed = _BRACKETED.fullmatch(trimmed)
    if bracketed is not None:
        host = bracketed.group(1)
        port_text = bracketed.group(2)
    elif trimmed.count(":") > 1:
        host = trimmed  # a bare IPv6 literal: no port
    else:
        host, sep, rest = trimmed.rpartition(":")
        if not sep:
            host, port_text = rest, None
        else:
            port_text = rest
    if not host:
        raise AddressError(f"no host in {text!r}")
    if port_text is None:
        return HostPort(host, default_port)
    if not re.fullmatch(r"\d{1,5}", port_text) or not 1 <= int(port_text) <= 65_535:
        raise AddressError(f"bad port in {text!r} (1..65535)")
    return HostPort(host, int(port_text))


def parse_address_list(text: str, default_port: int) -> list[HostPort]:
    """``h1[:p1],h2[:p2],...`` in order, duplicates dropped; at least one."""
    out: list[HostPort] = []
    for part in text.split(","):
        if not part.strip():
            continue
        address = parse_host_port(part, default_port)
        if address not in out:
            out.append(address)
    if not out:
        raise AddressError(f"no address in {text!r}")
    return out


_MAX_HINT_CHARS = 300
_HINT_HOST = re.compile(r"[A-Za-z0-9_-]{1,63}(\.[A-Za-z0-9_-]{1,63})*\.?|[0-9A-Fa-f:.]{2,45}")
"""A leader a standby names: a host name (labels of at most 63 characters) or an IP
address; anything else (a NUL, a space, a label no resolver takes) is not dialled."""


class LeaderRing:
    def __init__(self, addresses: Sequence[HostPort]) -> None:
        if not addresses:
            raise ValueError("LeaderRing needs at least one address")
        self._addresses = list(addresses)
        self._position = 0
        self._hint: HostPort | None = None
        self._current: HostPort | None = None
        self._used_hint = False
        self._failures = 0

    @property
    def several(self) -> bool:
        return len(self._addresses) > 1

    @property
    def address(self) -> HostPort:
        """The address dialled last, or to be dialled next before the first dial."""
        if self._current is not None:
            return self._current
        return self._addresses[self._position]

    def describe(self) -> str:
        return ",".join(str(a) for a in self._addresses)

    def next(self) -> HostPort:
        """The address to dial now."""
        hint, self._hint = self._hint, None
        self._used_hint = hint is not None
        self._current = hint if hint is not None else self._addresses[self._position]
        return self._current

    def failed(self) -> None:
        """The last address failed before it served us."""
        self._failures += 1
        if not self._used_hint:
            self._position = (self._position + 1) % len(self._addresses)

    def not_leader(self, leader: str | None, default_port: int) -> None:
        """The last address is not the leader; ``leader`` is the ``host:port`` it named
        (ignored unless its host is a plain host name or IP address)."""
        self.failed()
        self._hint = None
        if leader is None or len(leader) > _MAX_HINT_CHARS:
            return
        try:
            hint = parse_host_port(leader, default_port)
        except AddressError:
            return
        if _HINT_HOST.fullmatch(hint.host) is not None:
            self._hint = hint

    def succeeded(self) -> None:
        """The last address served us: stay with it."""
        self._failures = 0
        current = self._current
        if self._used_hint and current is not None and current in self._addresses:
            self._position = self._addresses.index(current)

    def should_pause(self) -> bool:
        """True when no leader was named and a session ended or a whole round failed."""
        return self._hint is None and self._failures % len(self._addresses) == 0
