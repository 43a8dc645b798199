"""One connection of a worker to a coordinator: frames in and out. The
frames sent in one turn of the loop (the results of many attempts, say)
leave in one write."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Mapping
from typing import Any

from ..addresses import HostPort
from ..framing import HEADER_BYTES, Message, check_length, decode_payload, encode_frame, read_length
from ..security import server_hostname


async def dial(
    address: HostPort, timeout_s: float, tls: ssl.SSLContext | None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to ``address`` (TLS with ``tls``), within ``timeout_s``; raises
    ``OSError``, ``asyncio.TimeoutError``, ``ssl.SSLError``, or ``ValueError`` for a host
    name no resolver takes (a label too long)."""
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(
            address.host,
            address.port,
            ssl=tls,
            server_hostname=server_hostname(address.host) if tls else None,
            ssl_handshake_timeout=timeout_s if tls else None,
        ),
        timeout_s,
    )
    sock = writer.get_extra_info("socket")
    if isinstance(sock, socket.socket):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return reader, writer


class Link:
    """One connection to a coordinator, and what was agreed on it."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        address: HostPort,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.address = address
        self.features: frozenset[str] = frozenset()
        self.registered = False
        self.not_leader = False
        self.closed = False
        self._outbox: list[bytes] = []

    def send(self, message: Mapping[str, Any]) -> bool:
        """Queues a frame; False once the connection is closing. Raises ``FrameTooLargeError``."""
        if self.closed or self.writer.is_closing():
            return False
        data = encode_frame(message)
        if not self._outbox:
            asyncio.get_running_loop().call_soon(self.flush)
        self._outbox.append(data)
        return True

    def flush(self) -> None:
        frames, self._outbox = self._outbox, []
        if frames and not self.closed and not self.writer.is_closing():
            self.writer.write(b"".join(frames))

    def close(self) -> None:
        """Ends the connection after what was sent (idempotent)."""
        self.flush()
        self.closed = True
        if not self.writer.is_closing():
            self.writer.close()

    def drop(self) -> None:
        """Ends the connection at once (unsent frames are dropped)."""
        self.closed = True
        transport = self.writer.transport
        transport.abort()

    async def read(self) -> Message | None:
        """The next message; None at the end of the stream between frames."""
        try:
            header = await self.reader.readexactly(HEADER_BYTES)
        except asyncio.IncompleteReadError:
            return None  # end of stream between frames (or inside the prefix): a close
        length = read_length(header)
        check_length(length)
        return decode_payload(await self.reader.readexactly(length))

    def end_reason(self) -> str:
        if self.not_leader:
            return "coordinator is not the leader"
        return "connection dropped"
