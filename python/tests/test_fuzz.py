"""Fuzzing of what a peer sends to a Python worker (seeded, standard library
only): the frame decoder and the way an attempt reaches a task process, then a
real worker fed streams of arbitrary frames by a fake coordinator. Hostile
values throughout: nesting far beyond the coordinator's 1,000 levels, numbers
beyond a float (``1e400``) or with thousands of digits, ``NaN``, lone
surrogates, fields of the wrong type, lying lengths, raw garbage, cut at
random places. Nothing of it may end the worker: a frame it cannot read costs
the connection, an attempt it cannot run fails, and it goes on working."""

from __future__ import annotations

import asyncio
import json
import queue
import random
import signal
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dtp.framing import (
    MAX_FRAME_BYTES,
    FrameDecoder,
    JsonTooDeepError,
    ProtocolError,
    decode_json,
    encode_frame,
    encode_json,
)
from dtp.protocol import (
    BUILTIN_TASK_TYPES,
    get_int,
    get_object,
    get_opt_int,
    get_opt_str,
    get_str,
)
from dtp.worker.options import WorkerOptions
from dtp.worker.pipe import PIPE_FRAME_BYTES, batch_frames
from dtp.worker.pool import TaskPool, encode_attempt
from dtp.worker.worker import Worker
from fakes import FakeConn, FakeServer
from support import Cluster, Proc, until

TASKS = Path(__file__).parent / "fixtures" / "py_tasks.py"
SEED_DECODER = 0x5EED_0001
SEED_WORKER = 0x5EED_0002

TYPES = [
    "WORKER_REGISTERED",
    "TASK_ASSIGN",
    "TASK_CANCEL",
    "HEARTBEAT_ACK",
    "ERROR",
    "TASK_RESULT",
    "JOB_STATUS",
    "TOTALLY_UNKNOWN",
]
FIELDS = [
    "jobId",
    "attemptId",
    "attemptNumber",
    "taskType",
    "payload",
    "timeoutMillis",
    "maxAttempts",
    "workerId",
    "features",
    "code",
    "message",
    "leader",
    "requestId",
    "v",
]
TASK_TYPES = ["SHA256", "WORD_COUNT", "FAIL", "py.depth", "py.repr", "py.upper", "nope", ""]
# Never a refusal (UNAUTHENTICATED, WORKER_REPLACED, TLS_REQUIRED): that stops a
# worker by design. A leader is never a name a resolver would be asked about:
# refused as a host, or this machine's loopback.
CODES = ["NOT_LEADER", "INTERNAL", "UNKNOWN_JOB", "", "x" * 300]
LEADERS = ["a" * 100, "x\x00y", "a b", "", "[::1", "127.0.0.1:0", "127.0.0.1:1", "\ud800"]
SCALARS = [
    "1e400",
    "-1e400",
    "1e309",
    "4.9e-324",
    "-0",
    "123456789012345678901234567890",
    "9" * 4299,
    "9" * 4301,
    "NaN",
    "Infinity",
    "true",
    "null",
    '"\\ud800"',
    '"\\u0000"',
    '"' + "é" * 50 + '"',
]


def nested(rng: random.Random, levels: int) -> str:
    """JSON text nesting ``levels`` deep: arrays, objects or a mix."""
    kind = rng.choice(["array", "object", "mixed"])
    if kind == "array":
        return "[" * levels + "]" * levels
    if kind == "object":
        return '{"a":' * (levels - 1) + "{}" + "}" * (levels - 1)
    return '{"a":[' * (levels // 2) + "1" + "]}" * (levels // 2)


def value(rng: random.Random, depth_ok: bool = True) -> str:
    roll = rng.random()
    if roll < 0.35:
        return rng.choice(SCALARS)
    if roll < 0.6 and depth_ok:
        return nested(rng, rng.choice([2, 50, 500, 990, 999, 1001, 1200, 2500, 5000, 30000]))
    if roll < 0.75:
        return json.dumps(rng.choice(LEADERS + CODES + TASK_TYPES))
    if roll < 0.9:
        return str(rng.randint(-(2**60), 2**60))
    return "[" + ",".join(rng.choice(SCALARS) for _ in range(rng.randint(0, 4))) + "]"


def message_text(rng: random.Random, serial: int) -> str:
    """A message of some type with arbitrary fields, or an assignment carrying a hostile payload."""
    if rng.random() < 0.1:
        leader = json.dumps(rng.choice(LEADERS))
        return '{"type":"ERROR","code":"NOT_LEADER","message":"standby","leader":' + leader + "}"
    if rng.random() < 0.4:
        fields = {
            "jobId": json.dumps(f"job-{serial}"),
            "attemptId": json.dumps(f"attempt-{serial}"),
            "attemptNumber": str(rng.randint(1, 3)),
            "taskType": json.dumps(rng.choice(TASK_TYPES)),
            "payload": '{"value":' + value(rng) + "}",
        }
        if rng.random() < 0.3:
            fields["timeoutMillis"] = str(rng.choice([1, 5, 50, 10**15, -1]))
        kind = "TASK_ASSIGN"
    else:
        names = rng.sample(FIELDS, rng.randint(0, 5))
        fields = {name: value(rng) for name in names}
        kind = rng.choice(TYPES)
        if kind == "ERROR" and rng.random() < 0.7:
            fields.update(code=json.dumps(rng.choice(CODES)), message='"fuzz"')
            fields["leader"] = ""
        if "leader" in fields:  # only names that send nothing past this machine
            fields["leader"] = json.dumps(rng.choice(LEADERS))
    body = ",".join(f'"{name}":{text}' for name, text in fields.items())
    return '{"type":"' + kind + '"' + ("," + body if body else "") + "}"


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def piece(rng: random.Random, serial: int) -> bytes:
    """One piece of a stream: a whole frame of something, or raw bytes."""
    roll = rng.random()
    if roll < 0.7:
        return frame(message_text(rng, serial).encode("utf-8", "surrogatepass"))
    if roll < 0.78:
        return frame(b"\xef\xbb\xbf" + message_text(rng, serial).encode("utf-8", "surrogatepass"))
    if roll < 0.86:
        return frame(value(rng).encode("utf-8", "surrogatepass"))
    if roll < 0.93:
        return frame(rng.randbytes(rng.randint(1, 300)))
    declared = rng.choice([-5, 0, 7, MAX_FRAME_BYTES + 1, 2**31 - 1])
    return struct.pack(">i", declared) + rng.randbytes(rng.randint(0, 40))


def cut(rng: random.Random, data: bytes) -> Iterator[bytes]:
    """``data`` in chunks cut at random places."""
    offsets = sorted({rng.randint(0, len(data)) for _ in range(rng.randint(0, 6))})
    start = 0
    for end in [*offsets, len(data)]:
        if end > start:
            yield data[start:end]
        start = end


def through_the_pipe(message: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """What the pool sends a task process for an attempt, as that process reads
    it back; or why the attempt cannot be sent."""
    body, problem = encode_attempt({**message, "requestId": 1})
    if problem is not None:
        return None, problem
    (data,) = batch_frames([body])
    (back,) = FrameDecoder(PIPE_FRAME_BYTES, allow_nan=True).feed(data)
    return back, None


def read_as_the_worker_does(message: dict[str, Any]) -> None:
    """The field readers of an assignment and an error: ``ProtocolError`` or values."""
    for name in ("jobId", "attemptId", "taskType", "workerId", "message"):
        try:
            get_str(message, name)
        except ProtocolError:
            pass
    for name in ("attemptNumber", "timeoutMillis", "maxAttempts"):
        try:
            get_int(message, name)
            get_opt_int(message, name)
        except ProtocolError:
            pass
    for reader in (get_object, get_opt_str):
        try:
            reader(message, "payload")
        except ProtocolError:
            pass


def test_the_decoder_and_the_way_to_a_task_process_survive_anything() -> None:
    rng = random.Random(SEED_DECODER)
    decoded = refused = 0
    for run in range(800):
        decoder = FrameDecoder()
        stream = b"".join(piece(rng, run * 10 + i) for i in range(rng.randint(1, 6)))
        try:
            for chunk in cut(rng, stream):
                for message in decoder.feed(chunk):
                    decoded += 1
                    read_as_the_worker_does(message)
                    # What the pool sends a task process, and that process reads back.
                    back, problem = through_the_pipe(message)
                    if problem is None:
                        assert back is not None and back["type"] == "RUN"
        except ProtocolError:
            refused += 1
    assert decoded > 300 and refused > 100, (decoded, refused)


def test_a_payload_at_the_coordinators_depth_passes_and_a_deeper_one_is_refused() -> None:
    payload = "[" * 999 + "]" * 999
    assign = '{"type":"TASK_ASSIGN","payload":{"a":' + payload + "}}"
    (message,) = FrameDecoder().feed(frame(assign.encode()))
    back, problem = through_the_pipe(message)
    assert problem is None and back is not None
    # Compared as text: == on values this deep would recurse past the limit itself.
    assert (
        encode_json(back["payload"]) == encode_json(message["payload"]) == '{"a":' + payload + "}"
    )
    with pytest.raises(ProtocolError, match="nested deeper"):
        FrameDecoder().feed(frame(("[" * 30_000 + "]" * 30_000).encode()))
    with pytest.raises(JsonTooDeepError):
        decode_json("[" * 30_000 + "]" * 30_000)


def test_an_infinity_reaches_the_handler_and_nan_stays_off_the_wire() -> None:
    (message,) = FrameDecoder().feed(frame(b'{"type":"TASK_ASSIGN","payload":{"v":1e400}}'))
    back, problem = through_the_pipe(message)
    assert problem is None and back is not None
    assert back["payload"] == {"v": float("inf")}
    with pytest.raises(ProtocolError):
        FrameDecoder().feed(frame(b'{"type":"TASK_ASSIGN","payload":{"v":NaN}}'))
    with pytest.raises(ValueError, match="Out of range float"):
        encode_frame({"type": "X", "v": float("inf")})


FEATURES = [
    "drain",
    "heartbeatAck",
    "retryable",
    "assignLimits",
    "prefetch",
    "progress",
    "requeue",
    "slots",
]


def register(server: FakeServer, worker: Proc, features: list[str]) -> FakeConn:
    """The worker's next connection, registered with these features."""

    def connected() -> FakeConn | None:
        if worker.popen.poll() is not None:
            raise AssertionError(f"the worker exited:\n{worker.output[-3000:]}")
        try:
            return server.connections.get(timeout=0.05)
        except queue.Empty:
            return None

    conn = until(connected, 30, "the worker to connect again")
    hello = conn.recv(timeout=30)
    assert hello is not None and hello["type"] == "WORKER_REGISTER", hello
    conn.send({"type": "WORKER_REGISTERED", "workerId": hello["workerId"], "features": features})
    return conn


def play(conn: FakeConn, rng: random.Random, data: bytes) -> None:
    try:
        for chunk in cut(rng, data):
            conn.sock.sendall(chunk)
        conn.sock.shutdown(socket.SHUT_WR)
    except OSError:
        conn.close()  # the worker dropped the connection: as it may
        return
    # Until the worker has read it all and closed its end (or a few seconds).
    conn.recv(timeout=5, skip=("HEARTBEAT", "TASK_RESULT", "TASK_PROGRESS", "WORKER_DRAINING"))
    conn.close()


def test_a_worker_survives_arbitrary_frames_from_its_coordinator(cluster: Cluster) -> None:
    rng = random.Random(SEED_WORKER)
    server = FakeServer()
    try:
        worker = cluster.py_worker(
            None,
            "fuzz-py",
            "--coordinator-host",
            f"127.0.0.1:{server.port}",
            "--reconnect-delay-millis",
            "10",
            "--cancel-grace-millis",
            "50",
            tasks=TASKS,
            capacity=2,
        )
        for run in range(150):
            conn = register(server, worker, rng.sample(FEATURES, rng.randint(0, len(FEATURES))))
            stream = b"".join(piece(rng, run * 10 + i) for i in range(rng.randint(1, 6)))
            play(conn, rng, stream)
        conn = register(server, worker, ["prefetch"])  # three attempts on two slots
        checks = {
            "sha": ("SHA256", '{"text":"abc"}'),
            # The deepest payload a coordinator accepts: 1,000 levels, itself the first.
            "deep": ("py.depth", '{"a":' + "[" * 999 + "]" * 999 + "}"),
            "huge": ("py.repr", '{"value":1e400}'),
        }
        for name, (task_type, body) in checks.items():
            conn.sock.sendall(
                frame(
                    (
                        f'{{"type":"TASK_ASSIGN","jobId":"{name}","attemptId":"{name}-1",'
                        f'"attemptNumber":1,"taskType":"{task_type}","payload":{body}}}'
                    ).encode()
                )
            )
        results: dict[str, Any] = {}
        deadline = time.monotonic() + 30
        while len(results) < len(checks) and time.monotonic() < deadline:
            got = conn.recv(timeout=30)
            assert got is not None, f"the worker dropped the connection:\n{worker.output[-3000:]}"
            if got["type"] == "TASK_RESULT":
                results[got["jobId"]] = (got["success"], got["result"] or got["error"])
        assert results == {
            "sha": (True, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            "deep": (True, "1000"),
            "huge": (True, "inf"),
        }
        worker.signal(signal.SIGTERM)
        conn.close()
        assert worker.wait_exit(30) == 0
        until(lambda: "worker closed" in worker.output, 10, "the worker's last line")
        assert "Traceback" not in worker.output, worker.output[-5000:]
        assert "failed on a message" not in worker.output
    finally:
        server.stop()


def test_an_unforeseen_error_on_a_message_costs_the_connection_only() -> None:
    """A fault of the worker's own on some message (none known: the fuzzing
    above finds none) drops that connection; the worker dials again."""

    async def scenario(server: FakeServer) -> None:
        pool = TaskPool(1, [], cancel_grace=0.1, queue_limit=0)
        assert (await pool.start())["type"] == "LOADED"
        options = WorkerOptions(
            worker_id="unforeseen",
            task_types=list(BUILTIN_TASK_TYPES),
            coordinator_host="127.0.0.1",
            coordinator_port=server.port,
            reconnect_delay_ms=10,
        )
        worker = Worker(options, pool)
        session = worker.lanes[0].session
        handle = session._on_message

        def failing_once(link: Any, message: dict[str, Any]) -> None:
            if message["type"] == "HEARTBEAT_ACK" and not failed:
                failed.append(message)
                raise RuntimeError("a fault of the worker's own")
            handle(link, message)

        failed: list[dict[str, Any]] = []
        session._on_message = failing_once  # type: ignore[method-assign]
        running = asyncio.ensure_future(worker.run())
        try:
            for ack in (True, False):  # the second connection: the worker dialled again
                conn = await asyncio.to_thread(server.next_connection, 10)
                hello = await asyncio.to_thread(conn.recv, 10)
                assert hello is not None and hello["type"] == "WORKER_REGISTER"
                conn.send({"type": "WORKER_REGISTERED", "workerId": "unforeseen"})
                if ack:
                    conn.send({"type": "HEARTBEAT_ACK", "workerId": "unforeseen"})
                    assert await asyncio.to_thread(conn.recv, 10) is None  # dropped
            assert failed and not running.done()
        finally:
            await asyncio.wait_for(worker.close(), 10)  # its task processes too
        assert await asyncio.wait_for(running, 10) == 0

    server = FakeServer()
    try:
        asyncio.run(asyncio.wait_for(scenario(server), 60))
    finally:
        server.stop()
