"""One connection of a worker to a coordinator: frames in and out. The
frames sent in one turn of the loop (the results of many attempts, say)
leave in one write."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from ..addresses import HostPort
from ..framing import HEADER_BYTES, Message, check_length, decode_payload, encode_frame, read_length


class Link:
    """One connection to a coordinator, and what was agreed on it."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        address: HostPort,
        capacity: int,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.address = address
        self.capacity = capacity
        """Attempts at once, as registered (1,024 when the coordinator lacks ``slots``)."""
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
