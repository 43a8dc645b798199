"""What the worker and the client send to peers that offer no extension (a v1
coordinator), and how both follow a standby's NOT_LEADER to the leader."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

import dtp
from fakes import V1_REQUESTS, FakeServer, V1ClientPort, not_leader_port
from support import HOST, Cluster, until

TASKS = Path(__file__).parent / "fixtures" / "py_tasks.py"
V1_WORKER_MESSAGES = {"WORKER_REGISTER", "HEARTBEAT", "TASK_RESULT"}


def assign(
    job: str, task_type: str, payload: dict[str, object], **extra: object
) -> dict[str, object]:
    return {
        "type": "TASK_ASSIGN",
        "jobId": job,
        "attemptId": f"{job}-a1",
        "attemptNumber": 1,
        "taskType": task_type,
        "payload": payload,
        **extra,
    }


def test_the_worker_uses_no_extension_a_v1_coordinator_did_not_offer(cluster: Cluster) -> None:
    fake = FakeServer()
    try:
        worker = cluster.py_worker(
            None,
            "py-v1",
            "--coordinator-host",
            f"{HOST}:{fake.port}",
            "--coordinator-timeout-millis",
            "200",
            tasks=TASKS,
            capacity=1,
            wait=False,
        )
        conn = fake.next_connection()
        register = conn.recv()
        assert register is not None and register["type"] == "WORKER_REGISTER"
        assert register["workerId"] == "py-v1" and register["capacity"] == 1
        assert register["taskTypes"][:5] == ["SLEEP", "WORD_COUNT", "SHA256", "PRIME_COUNT", "FAIL"]
        assert "py.upper" in register["taskTypes"]
        assert register["heartbeatAck"] is True and register["prefetch"] == 2
        assert "authToken" not in register
        conn.send({"type": "WORKER_REGISTERED", "workerId": "py-v1"})  # no features: v1

        # Without `retryable`, a NonRetryableError is reported without the field.
        conn.send(assign("j1", "py.nonretryable", {}, timeoutMillis=1, maxAttempts=9))
        result = conn.recv()
        assert result == {
            "type": "TASK_RESULT",
            "workerId": "py-v1",
            "jobId": "j1",
            "attemptId": "j1-a1",
            "success": False,
            "result": None,
            "error": "not today",
        }

        # Without `assignLimits` the deadline and the attempt limit are not acted on.
        conn.send(assign("j2", "py.sleep", {"seconds": 0.3}, timeoutMillis=20, maxAttempts=9))
        # Without `prefetch` nothing beyond the capacity is taken.
        conn.send(assign("j3", "py.upper", {"text": "x"}))
        refused = conn.recv()
        assert refused is not None
        assert (refused["jobId"], refused["success"], refused["error"]) == (
            "j3",
            False,
            "worker at capacity",
        )
        slept = conn.recv()
        assert slept is not None and (slept["jobId"], slept["success"]) == ("j2", True), slept

        conn.send(assign("j4", "py.context", {}, timeoutMillis=5000, maxAttempts=9))
        context = conn.recv()
        assert context is not None and context["resultFormat"] == "json"
        seen = json.loads(context["result"])
        assert seen["deadline_at_ms"] is None and seen["max_attempts"] is None

        # Silence is not judged without `heartbeatAck`: heartbeats go on well past
        # the coordinator timeout (200 ms) while the fake says nothing.
        beats = len([m for m in conn.received if m["type"] == "HEARTBEAT"])
        until(
            lambda: (
                conn.recv(timeout=5, skip=())
                and len([m for m in conn.received if m["type"] == "HEARTBEAT"]) >= beats + 6
            ),
            10,
            "six more heartbeats",
        )
        assert not conn.closed

        # Draining without `drain`: no WORKER_DRAINING; a late assignment is refused.
        conn.send(assign("j5", "py.sleep", {"seconds": 0.5}))
        worker.wait_for(r"task started jobId=j5 ")
        worker.signal(signal.SIGTERM)
        worker.wait_for(r"coordinator does not offer drain")
        conn.send(assign("j6", "py.upper", {"text": "late"}))
        late = conn.recv()
        assert late is not None and (late["jobId"], late["error"]) == (
            "j6",
            "worker is shutting down",
        )
        finished = conn.recv()
        assert finished is not None and (finished["jobId"], finished["success"]) == ("j5", True)
        assert worker.wait_exit() == 0
        assert conn.recv() is None
        assert {m["type"] for m in conn.received} <= V1_WORKER_MESSAGES
    finally:
        fake.stop()


def test_the_client_probes_and_falls_back_on_a_v1_coordinator() -> None:
    v1 = V1ClientPort(polls_to_complete=2)
    try:
        with dtp.Client(f"{HOST}:{v1.server.port}") as client:
            job = client.submit("SHA256", {"text": "abc"})
            assert job.snapshot["state"] == "QUEUED"  # fetched: a v1 reply has no snapshot
            assert job.serving_workers is None
            assert job.result(timeout=10) == "done"  # polled, after the probe said no
            for n in range(5):
                v1.add(f"old-{n}", "COMPLETED" if n % 2 else "FAILED", created=n)
            failed = list(client.list(state="FAILED", page_size=2))
            assert [j["jobId"] for j in failed] == ["old-4", "old-2", "old-0"]
            page, cursor = client.list_page(limit=2)
            assert len(page) == 2 and cursor is not None and cursor.startswith("dtp-local:")
        probes = [c for c in v1.server.all if any(m["type"] == "WAIT_JOB" for m in c.received)]
        assert len(probes) == 1 and len(probes[0].received) == 1  # its own connection
        working = [c for c in v1.server.all if c not in probes]
        assert working and all(
            m["type"] in {"SUBMIT_JOB", "GET_JOB_STATUS", "LIST_JOBS"}
            for c in working
            for m in c.received
        )
        with pytest.raises(dtp.AuthError) as raised:
            dtp.Client(f"{HOST}:{v1.server.port}", token="secret").status("job-1")
        assert raised.value.code == "AUTH_UNSUPPORTED"
    finally:
        v1.server.stop()


def test_worker_and_client_follow_not_leader_to_the_leader(cluster: Cluster) -> None:
    c = cluster.coordinator()
    worker_standby = not_leader_port(f"{HOST}:{c.worker_port}", close_after=True)
    client_standby = not_leader_port(c.client_address, close_after=False)
    try:
        worker = cluster.py_worker(
            c, "py-follower", "--coordinator-host", f"{HOST}:{worker_standby.port}", tasks=TASKS
        )
        assert f"leader={HOST}:{c.worker_port}" in worker.output
        with dtp.Client(f"{HOST}:{client_standby.port}") as client:
            assert client.submit("py.upper", {"text": "led"}).result(timeout=30) == "LED"
            assert client.address == c.client_address
        # AUTH gets NOT_LEADER first on a standby, and is followed too (a coordinator
        # without client tokens answers AUTH_OK).
        with dtp.Client(f"{HOST}:{client_standby.port}", token="any") as client:
            assert client.workers()[0]["workerId"] == "py-follower"
        assert all(m["type"] == "AUTH" for m in client_standby.all[-1].received)
    finally:
        worker_standby.stop()
        client_standby.stop()


def test_with_several_addresses_a_standby_that_names_no_leader_is_passed_over(
    cluster: Cluster,
) -> None:
    c = cluster.coordinator()
    standby = not_leader_port("", close_after=True, name_leader=False)
    try:
        worker = cluster.py_worker(
            c,
            "py-ring",
            "--coordinator-host",
            f"{HOST}:{standby.port},{HOST}:{c.worker_port}",
            tasks=TASKS,
        )
        assert "leader=unknown" in worker.output
        assert [m["type"] for m in standby.all[0].received] == ["WORKER_REGISTER"]
    finally:
        standby.stop()


def test_the_client_sends_no_extension_a_v1_coordinator_would_misread() -> None:
    v1 = V1ClientPort()
    try:
        with dtp.Client(f"{HOST}:{v1.server.port}") as client:
            assert client.features() == {
                "waitJob": False,
                "time": False,
                "flows": False,
                "queues": False,
                "events": False,
                "signals": False,
            }
            with pytest.raises(dtp.FeatureUnsupportedError):
                client.submit("SHA256", {"input": "x"}, queue="emails")
            with pytest.raises(dtp.FeatureUnsupportedError):
                client.submit("SHA256", {"input": "x"}, depends_on=["j-1"])
            with pytest.raises(dtp.FeatureUnsupportedError):
                client.submit("SHA256", {"input": "x"}, delay_ms=10)
            with pytest.raises(dtp.FeatureUnsupportedError):
                client.submit_flow({"jobs": [{"ref": "a", "task_type": "SHA256", "payload": {}}]})
            with pytest.raises(dtp.FeatureUnsupportedError):
                client.queues.list()
            with pytest.raises(dtp.UnsupportedFeatureError):
                client.schedules.list()
            with pytest.raises(dtp.EventsUnsupportedError):
                next(client.watch("j-1"))
            assert client.submit("SHA256", {"input": "x"}).job_id  # a v1 request goes on
        # Nothing but v1 requests reached it, apart from the probes on connections of their own.
        for conn in v1.server.all:
            kinds = [m["type"] for m in conn.received]
            assert set(kinds) <= V1_REQUESTS or len(kinds) == 1, kinds
    finally:
        v1.server.stop()


def test_a_worker_with_queues_stops_on_a_coordinator_without_them(cluster: Cluster) -> None:
    fake = FakeServer()
    try:
        worker = cluster.py_worker(
            None,
            "py-queues-v1",
            "--coordinator-host",
            f"{HOST}:{fake.port}",
            "--queues",
            "emails",
            tasks=TASKS,
            wait=False,
        )
        conn = fake.next_connection()
        register = conn.recv()
        assert register is not None and register["queues"] == ["emails"]
        conn.send({"type": "WORKER_REGISTERED", "workerId": "py-queues-v1"})  # no features
        assert worker.wait_exit() == 1
        assert "this coordinator does not support queues (--queues emails" in worker.output
    finally:
        fake.stop()
