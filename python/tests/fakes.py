"""Stand-ins for coordinators, speaking the wire protocol from a test: a v1
coordinator (the reference protocol without extensions) and a standby that
answers NOT_LEADER. Each connection is served on a thread of its own by a
handler function; every frame received is recorded."""

from __future__ import annotations

import queue
import socket
import threading
from collections.abc import Callable
from typing import Any

from dtp.framing import FrameDecoder, Message, encode_frame


class FakeConn:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.received: list[Message] = []
        self._decoder = FrameDecoder()
        self._pending: list[Message] = []
        self.closed = False

    def recv(self, timeout: float = 10.0, skip: tuple[str, ...] = ("HEARTBEAT",)) -> Message | None:
        """The next frame whose type is not in ``skip``; None when the peer closed."""
        self.sock.settimeout(timeout)
        while True:
            while self._pending:
                message = self._pending.pop(0)
                if message["type"] not in skip:
                    return message
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                self.closed = True
                return None
            for message in self._decoder.feed(data):
                self.received.append(message)
                self._pending.append(message)

    def send(self, message: Message) -> None:
        self.sock.sendall(encode_frame(message))

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass


class FakeServer:
    """Listens on 127.0.0.1 (an ephemeral port); ``handler(conn)`` serves each connection."""

    def __init__(self, handler: Callable[[FakeConn], None] | None = None) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._handler = handler
        self.connections: queue.Queue[FakeConn] = queue.Queue()
        self.all: list[FakeConn] = []
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            conn = FakeConn(sock)
            self.all.append(conn)
            if self._handler is None:
                self.connections.put(conn)
            else:
                threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: FakeConn) -> None:
        assert self._handler is not None
        try:
            self._handler(conn)
        except OSError:
            pass
        finally:
            conn.close()

    def next_connection(self, timeout: float = 20.0) -> FakeConn:
        return self.connections.get(timeout=timeout)

    def stop(self) -> None:
        self._stopped = True
        self._listener.close()
        for conn in self.all:
            conn.close()


V1_REQUESTS = {"SUBMIT_JOB", "GET_JOB_STATUS", "LIST_JOBS", "LIST_WORKERS", "CANCEL_JOB"}


class V1ClientPort:
    """The client port of a v1 coordinator: v1 requests only, jobs kept in memory.

    An extension request (``WAIT_JOB``, ``AUTH``) is answered as the reference
    does: ``ERROR "Malformed request: Undecodable message ..."``, then a close.
    A job completes after ``polls_to_complete`` status reads.
    """

    def __init__(self, polls_to_complete: int = 2) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self._reads: dict[str, int] = {}
        self._polls = polls_to_complete
        self._lock = threading.Lock()
        self.server = FakeServer(self._serve)

    def _job(self, job_id: str, state: str, created: int) -> dict[str, Any]:
        return {
            "jobId": job_id,
            "taskType": "SHA256",
            "state": state,
            "attempts": 1,
            "maxAttempts": 3,
            "workerId": None,
            "result": "done" if state == "COMPLETED" else None,
            "error": None,
            "createdAtMillis": created,
            "updatedAtMillis": created,
            "priority": "NORMAL",
        }

    def add(self, job_id: str, state: str, created: int) -> None:
        with self._lock:
            self.jobs[job_id] = self._job(job_id, state, created)

    def _serve(self, conn: FakeConn) -> None:
        while True:
            message = conn.recv(timeout=30, skip=())
            if message is None:
                return
            kind = message["type"]
            if kind not in V1_REQUESTS:
                conn.send(
                    {"type": "ERROR", "message": f"Malformed request: Undecodable message {kind}"}
                )
                return
            conn.send(self._answer(message))

    def _answer(self, message: Message) -> Message:
        kind = message["type"]
        with self._lock:
            if kind == "SUBMIT_JOB":
                job_id = f"job-{len(self.jobs) + 1}"
                self.jobs[job_id] = self._job(job_id, "QUEUED", 1000 + len(self.jobs))
                self._reads[job_id] = 0
                return {"type": "JOB_SUBMITTED", "jobId": job_id}
            if kind == "GET_JOB_STATUS":
                job = self.jobs.get(str(message.get("jobId")))
                if job is None:
                    return {"type": "ERROR", "message": f"Unknown job: {message.get('jobId')}"}
                self._reads[job["jobId"]] = self._reads.get(job["jobId"], 0) + 1
                if self._reads[job["jobId"]] > self._polls and job["state"] == "QUEUED":
                    job.update(state="COMPLETED", result="done")
                return {"type": "JOB_STATUS", "job": dict(job)}
            if kind == "LIST_JOBS":
                every = sorted(self.jobs.values(), key=lambda j: -int(j["createdAtMillis"]))
                return {"type": "JOB_LIST", "jobs": every}
            if kind == "CANCEL_JOB":
                job = self.jobs[str(message["jobId"])]
                job["state"] = "CANCELLED"
                return {"type": "JOB_CANCEL", "cancelled": True, "job": dict(job)}
            return {"type": "WORKER_LIST", "workers": []}


def not_leader_port(leader: str, close_after: bool, name_leader: bool = True) -> FakeServer:
    """A standby: every frame gets ``ERROR NOT_LEADER`` naming ``leader`` (or no one)."""

    def serve(conn: FakeConn) -> None:
        while True:
            message = conn.recv(timeout=30, skip=())
            if message is None:
                return
            answer: Message = {
                "type": "ERROR",
                "code": "NOT_LEADER",
                "message": "NOT_LEADER: this coordinator is a standby",
            }
            if name_leader:
                answer["leader"] = leader
            conn.send(answer)
            if close_after:
                return

    return FakeServer(serve)


def shard_map(worker_addresses: list[str | None]) -> list[Message]:
    """The map where shard ``n`` is led from ``worker_addresses[n]`` (None: no leader)."""
    return [
        {
            "shard": shard,
            "leader": address,
            "epoch": 0 if address is None else 1,
            "clientAddress": None,
            "workerAddress": address,
        }
        for shard, address in enumerate(worker_addresses)
    ]


class FakeShardPort:
    """A sharded coordinator's public worker port, as a worker sees it: every
    ``WORKER_REGISTER`` is answered ``ERROR NOT_LEADER`` with the map (``shards``)
    and the connection closed; every ``LIST_SHARDS`` is answered ``SHARD_LIST``
    on a connection that stays open. The test sets the map (``shards``) at will."""

    def __init__(self, shards: list[Message]) -> None:
        self.shards = shards
        self.registrations: list[Message] = []
        self.list_requests: list[Message] = []
        self._lock = threading.Lock()
        self.server = FakeServer(self._serve)
        self.port = self.server.port

    def _serve(self, conn: FakeConn) -> None:
        while True:
            message = conn.recv(timeout=60, skip=())
            if message is None:
                return
            with self._lock:
                shards = list(self.shards)
            if message["type"] == "WORKER_REGISTER":
                self.registrations.append(message)
                conn.send(
                    {
                        "type": "ERROR",
                        "code": "NOT_LEADER",
                        "message": "SHARDED: register with the shards of this database",
                        "shards": shards,
                    }
                )
                return
            if message["type"] != "LIST_SHARDS":
                return
            self.list_requests.append(message)
            conn.send({"type": "SHARD_LIST", "shards": shards, "coordinators": []})

    def set_map(self, worker_addresses: list[str | None]) -> None:
        with self._lock:
            self.shards = shard_map(worker_addresses)

    def stop(self) -> None:
        self.server.stop()
