"""One blocking client-port connection: a request goes out, its one reply comes
back. With a token, ``AUTH`` is the first frame and anything but ``AUTH_OK``
fails the connection (never a silent downgrade).

A broken connection (reset, a close, a frame that does not decode, a reply
that is not a client reply) is never reused: the request in flight fails with
``TransportError`` ``CONNECTION_LOST``, its outcome unknown.
"""

from __future__ import annotations

import select
import socket
import ssl
from collections.abc import Mapping
from typing import Any

from .errors import AuthError, NotLeaderError, RemoteError, TransportError
from .framing import (
    HEADER_BYTES,
    FrameTooLargeError,
    Message,
    ProtocolError,
    check_length,
    decode_payload,
    encode_frame,
    read_length,
)
from .protocol import NOT_LEADER, UNAUTHENTICATED, is_not_understood, text_of
from .security import describe_os_error, describe_tls_error, is_tls_refusal, server_hostname

CLIENT_REPLIES = frozenset(
    {
        "JOB_SUBMITTED",
        "SUBMIT_REJECTED",
        "JOB_STATUS",
        "JOB_LIST",
        "WORKER_LIST",
        "JOB_CANCEL",
        "ERROR",
        "AUTH_OK",
        "JOBS_PURGED",
        "JOBS_SUBMITTED",
        "SCHEDULE_LIST",
        "SCHEDULE_INFO",
        "SCHEDULE_DELETED",
        "QUEUE_LIST",
        "QUEUE_INFO",
        "FLOW_SUBMITTED",
        "JOBS_RERUN",
        "SUBSCRIBED",
        "JOB_SIGNALLED",
        "EVENT_PUBLISHED",
        "TRIGGER_INFO",
        "TRIGGER_LIST",
        "SHARD_LIST",
        "TRIGGER_DELETED",
    }
)
PUSHES = frozenset({"JOB_EVENT", "EVENTS_MISSED"})
"""Messages a subscription's connection carries that answer no request."""


def dial(host: str, port: int, timeout: float, tls: ssl.SSLContext | None) -> socket.socket:
    """A connected (and, with ``tls``, handshaken) socket; raises ``TransportError``."""
    try:
        raw = socket.create_connection((host, port), timeout=timeout)
    except OSError as err:
        raise TransportError(
            "CONNECT_FAILED", f"cannot connect to {host}:{port}: {describe_os_error(err)}"
        ) from None
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if tls is None:
        return raw
    try:
        return tls.wrap_socket(raw, server_hostname=server_hostname(host))
    except (OSError, ssl.SSLError) as err:
        raw.close()
        code = "TLS_FAILED" if is_tls_refusal(err) else "CONNECT_FAILED"
        raise TransportError(code, f"{host}:{port}: {describe_tls_error(err)}") from None


class Connection:
    def __init__(self, sock: socket.socket, address: str) -> None:
        self._sock = sock
        self.address = address
        self._broken: str | None = None

    @classmethod
    def open(
        cls,
        host: str,
        port: int,
        timeout: float,
        tls: ssl.SSLContext | None = None,
        token: str | None = None,
    ) -> Connection:
        """Dials and, with a token, authenticates. Raises ``TransportError``, ``AuthError``,
        ``NotLeaderError`` or the ``RemoteError`` sent instead of ``AUTH_OK``."""
        host_port = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        conn = cls(dial(host, port, timeout, tls), host_port)
        if token is not None:
            try:
                conn._authenticate(token, timeout)
            except BaseException:
                conn.close()
                raise
        return conn

    def _authenticate(self, token: str, timeout: float) -> None:
        try:
            reply = self.request({"type": "AUTH", "token": token}, timeout)
        except TransportError as err:
            raise AuthError(
                "AUTH_UNSUPPORTED", f"coordinator does not support authentication ({err.message})"
            ) from None
        kind = reply["type"]
        if kind == "AUTH_OK":
            return
        if kind != "ERROR":
            raise AuthError(
                "AUTH_UNSUPPORTED",
                f"coordinator does not support authentication (it answered {kind})",
            )
        if reply.get("code") == UNAUTHENTICATED:
            raise AuthError(UNAUTHENTICATED, text_of(reply, "message"))
        if reply.get("code") == NOT_LEADER:
            raise NotLeaderError(reply)
        if is_not_understood(reply):
            raise AuthError(
                "AUTH_UNSUPPORTED",
                f"coordinator does not support authentication: {reply.get('message')}",
            )
        raise RemoteError(reply)

    @property
    def is_open(self) -> bool:
        return self._broken is None

    def still_open(self) -> bool:
        """False when the coordinator has closed this connection since its last reply.

        Between requests nothing may arrive; so a readable socket means the
        coordinator closed it (or broke the protocol). Seen before a request is
        sent, that is known to be harmless: a fresh connection can take it.
        """
        if self._broken is not None:
            return False
        try:
            readable, _, _ = select.select([self._sock], [], [], 0)
            if not readable:
                return True
            self._sock.setblocking(False)
            data = self._sock.recv(1)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return True  # TLS records that carry no data (a session ticket)
        except (OSError, ValueError) as err:
            self._fail(f"connection to {self.address} lost: {describe_os_error(err)}")
            return False
        self._fail(
            "closed by the coordinator" if not data else "unsolicited data from the coordinator"
        )
        return False

    def request(self, message: Mapping[str, Any], timeout: float | None) -> Message:
        """Sends one request and reads its reply (any reply type); ``timeout`` in seconds."""
        if self._broken is not None:
            raise TransportError("CONNECTION_LOST", self._broken)
        try:
            frame = encode_frame(message)
        except FrameTooLargeError as err:
            raise ValueError(str(err)) from None
        try:
            self._sock.settimeout(timeout)
            self._sock.sendall(frame)
            header = self._read_exactly(HEADER_BYTES, at_boundary=True)
            length = read_length(header)
            check_length(length)
            reply = decode_payload(self._read_exactly(length, at_boundary=False))
        except socket.timeout:
            raise self._fail(f"no reply from {self.address} within {timeout} s") from None
        except ProtocolError as err:
            raise self._fail(f"coordinator broke the protocol: {err}") from None
        except (OSError, ssl.SSLError) as err:
            raise self._fail(
                f"connection to {self.address} lost: {describe_os_error(err)}"
            ) from None
        if reply["type"] not in CLIENT_REPLIES:
            raise self._fail(f"coordinator sent {reply['type'][:60]}, which is not a client reply")
        return reply

    def receive(self, timeout: float) -> Message | None:
        """The next pushed message (``JOB_EVENT``, ``EVENTS_MISSED``) of a subscription's
        connection; None when none began within ``timeout`` seconds. Raises
        ``TransportError`` ``CONNECTION_LOST`` once the connection ended."""
        if self._broken is not None:
            raise TransportError("CONNECTION_LOST", self._broken)
        try:
            readable, _, _ = select.select([self._sock], [], [], timeout)
            pending = isinstance(self._sock, ssl.SSLSocket) and self._sock.pending() > 0
            if not readable and not pending:
                return None
            # A frame that has begun arrives whole soon: read it under the usual limit.
            self._sock.settimeout(max(timeout, 30.0))
            header = self._read_exactly(HEADER_BYTES, at_boundary=True)
            length = read_length(header)
            check_length(length)
            message = decode_payload(self._read_exactly(length, at_boundary=False))
        except socket.timeout:
            raise self._fail(f"a frame from {self.address} stopped in the middle") from None
        except ProtocolError as err:
            raise self._fail(f"coordinator broke the protocol: {err}") from None
        except (OSError, ssl.SSLError, ValueError) as err:
            raise self._fail(f"connection to {self.address} lost: {err}") from None
        if message["type"] not in PUSHES and message["type"] != "ERROR":
            raise self._fail(f"coordinator pushed {message['type'][:60]}, which is no event")
        return message

    def _read_exactly(self, count: int, at_boundary: bool) -> bytes:
        chunks = bytearray()
        while len(chunks) < count:
            data = self._sock.recv(count - len(chunks))
            if not data:
                where = "" if at_boundary and not chunks else " in the middle of a frame"
                raise OSError(0, f"closed by the coordinator{where}")
            chunks += data
        return bytes(chunks)

    def _fail(self, reason: str) -> TransportError:
        self._broken = reason
        self._close_socket()
        return TransportError("CONNECTION_LOST", reason)

    def shutdown(self) -> None:
        """Ends the connection from another thread: a read blocked on it returns at once."""
        if self._broken is None:
            self._broken = "connection closed"
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._close_socket()

    def close(self) -> None:
        if self._broken is None:
            self._broken = "connection closed"
        self._close_socket()

    def _close_socket(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass
