"""Log lines stay small: a message or field over 8 KiB (a coordinator's ERROR
text, a handler's line or error) is cut and marked ``... (truncated)``, as an
attempt's error is; a lone surrogate from a peer is written escaped."""

from __future__ import annotations

import io
import json
import logging
import signal
from pathlib import Path

from dtp import logs
from dtp.protocol import MAX_ERROR_CHARS, TRUNCATED_MARK
from fakes import FakeServer
from support import Cluster

TASKS = Path(__file__).parent / "fixtures" / "py_tasks.py"
MB = 1_000_000


def record(text: str, **fields: object) -> logging.LogRecord:
    made = logging.LogRecord("dtp.worker", logging.ERROR, __file__, 1, text, None, None)
    made.fields = fields
    return made


def test_both_formats_cut_long_messages_and_fields() -> None:
    deep: list[object] = []
    for _ in range(5000):
        deep = [deep]
    line = record("m" * MB, message="x" * MB, nested={"k": "v" * MB}, deep=deep, short="ok")
    text = logs.TextFormatter().format(line)
    assert len(text) < 4 * (MAX_ERROR_CHARS + 100), len(text)
    assert text.count(TRUNCATED_MARK) == 3
    assert "short=ok" in text and "deep=<list>" in text
    out = json.loads(logs.JsonFormatter().format(line))
    assert out["msg"] == "m" * MAX_ERROR_CHARS + TRUNCATED_MARK
    assert out["message"] == "x" * MAX_ERROR_CHARS + TRUNCATED_MARK
    assert out["nested"].endswith(TRUNCATED_MARK) and len(out["nested"]) == MAX_ERROR_CHARS + 15
    assert (out["short"], out["deep"]) == ("ok", "<list>")


def test_a_lone_surrogate_is_written_escaped() -> None:
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        logs.setup("info", "text", stream)
        logging.getLogger("dtp.worker").warning("a \ud800 b", extra={"fields": {"id": "\udfff"}})
        stream.flush()
    finally:
        root.handlers[:], root.level = saved
    written = stream.buffer.getvalue().decode("utf-8")
    assert "a \\ud800 b id=\\udfff" in written


def test_the_worker_cuts_a_megabyte_from_its_coordinator_and_from_a_handler(
    cluster: Cluster,
) -> None:
    server = FakeServer()
    try:
        worker = cluster.py_worker(
            None, "loud", "--coordinator-host", f"127.0.0.1:{server.port}", tasks=TASKS
        )
        conn = server.next_connection()
        hello = conn.recv()
        assert hello is not None and hello["type"] == "WORKER_REGISTER"
        conn.send({"type": "WORKER_REGISTERED", "workerId": "loud", "features": []})
        conn.send(
            {
                "type": "TASK_ASSIGN",
                "jobId": "j" * MB,
                "attemptId": "a-1",
                "attemptNumber": 1,
                "taskType": "py.loud",
                "payload": {},
            }
        )
        result = conn.recv(timeout=30)
        assert result is not None and result["type"] == "TASK_RESULT"
        assert result["error"] == "ValueError: " + "e" * (MAX_ERROR_CHARS - 12) + TRUNCATED_MARK
        conn.send({"type": "ERROR", "code": "INTERNAL", "message": "x" * MB})
        worker.wait_for(r"error from coordinator message=\"x+\.\.\. \(truncated\)\"")
        worker.signal(signal.SIGTERM)
        assert worker.wait_exit(30) == 0
    finally:
        server.stop()
    out = worker.output
    longest = max(len(line) for line in out.splitlines())
    assert longest < 2 * MAX_ERROR_CHARS + 500, longest
    assert " " + "l" * MAX_ERROR_CHARS + TRUNCATED_MARK + " job_id=" in out  # the handler's line
    assert 'jobId="' + "j" * MAX_ERROR_CHARS + TRUNCATED_MARK + '"' in out
