"""Two coordinators sharing PostgreSQL, one leading: a Python worker and a
Python client given both addresses find the leader, and follow it when it is
killed and the standby takes over. Two sharded coordinators: a client
reaches every shard through either, and a Python worker given one of them
works on every shard and follows the shards when that one is killed. Needs
DTP_TEST_PG_URL (npm test starts a server) and psql; skipped without them,
except in CI."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

import dtp
from dtp.shards import shard_of_queue
from support import HOST, Cluster, Coordinator, until

TASKS = Path(__file__).parent / "fixtures" / "py_tasks.py"


def psql(url: str, sql: str) -> None:
    subprocess.run(
        ["psql", url, "-v", "ON_ERROR_STOP=1", "-qc", sql],
        check=True,
        capture_output=True,
        timeout=60,
    )


@pytest.fixture
def database() -> Iterator[str]:
    base = os.environ.get("DTP_TEST_PG_URL", "")
    if not base or shutil.which("psql") is None:
        if os.environ.get("CI") == "true":
            raise AssertionError("CI must provide DTP_TEST_PG_URL and psql")
        pytest.skip("no PostgreSQL server (DTP_TEST_PG_URL) or no psql: failover test skipped")
    name = f"dtp_t_{secrets.token_hex(6)}"
    psql(base, f"CREATE DATABASE {name}")
    try:
        yield urlunsplit(urlsplit(base)._replace(path=f"/{name}"))
    finally:
        psql(base, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def registered_on(coordinators: list[Coordinator], worker_id: str, after: list[int]) -> int:
    pattern = re.compile(rf"worker registered workerId={worker_id}\b")

    def which() -> int | None:
        for i, c in enumerate(coordinators):
            if pattern.search(c.proc.output, after[i]):
                return i + 1
        return None

    return until(which, 30, f"{worker_id} to register with a leader") - 1


def test_worker_and_client_follow_the_leader_across_a_failover(
    cluster: Cluster, database: str
) -> None:
    common = [
        "--database",
        database,
        "--lease-ttl-millis",
        "1500",
        "--lease-renew-interval-millis",
        "300",
        "--advertise-host",
        HOST,
    ]
    nodes = [cluster.coordinator(*common), cluster.coordinator(*common)]
    workers = ",".join(f"{HOST}:{n.worker_port}" for n in nodes)
    clients = ",".join(n.client_address for n in nodes)
    cluster.py_worker(None, "py-ha", "--coordinator-host", workers, tasks=TASKS, wait=False)
    leader = registered_on(nodes, "py-ha", [0, 0])
    with dtp.Client(clients) as client:
        before = client.submit("py.upper", {"text": "before"}, idempotency_key="ha-1")
        assert before.result(timeout=30) == "BEFORE"
        marks = [len(n.proc.output) for n in nodes]
        nodes[leader].proc.signal(signal.SIGKILL)
        standby = 1 - leader
        assert registered_on(nodes, "py-ha", [marks[0], marks[1]]) == standby
        after = client.submit("py.upper", {"text": "after"})
        assert after.result(timeout=30) == "AFTER"
        assert client.address == nodes[standby].client_address
        assert client.status(before.job_id)["result"] == "BEFORE"


def two_sharded_coordinators(cluster: Cluster, database: str) -> tuple[Coordinator, Coordinator]:
    """Two coordinators of a 4-shard database, once they lead 2 shards each."""
    lease = ["--lease-ttl-millis", "1000", "--lease-renew-interval-millis", "200"]
    a = cluster.coordinator("--database", database, "--shards", "4", *lease)
    b = cluster.coordinator("--database", database, "--shards", "4", *lease)

    def shared_out() -> bool:
        with a.client() as client:
            counts = sorted(c["shards"] for c in client.shards()["coordinators"])
        return counts == [2, 2]

    until(shared_out, 30, "the shards shared out")
    return a, b


def test_a_client_reaches_every_shard_through_any_sharded_coordinator(
    cluster: Cluster, database: str
) -> None:
    a, b = two_sharded_coordinators(cluster, database)
    queues = [f"tenant-{i}" for i in range(8)]
    with a.client() as via_a, b.client() as via_b:
        ids = [via_a.submit("SLEEP", {"durationMillis": 1}, queue=q).job_id for q in queues]
        assert {int(i[-3:], 16) for i in ids} == {0, 1, 2, 3}, "every shard has a job"
        for job_id, queue in zip(ids, queues):
            job = via_b.status(job_id)
            assert (job["queue"], job["state"]) == (queue, "QUEUED")
        assert via_b.cancel(ids[0])["cancelled"] is True


def test_a_python_worker_works_on_every_shard_and_follows_them_when_a_coordinator_dies(
    cluster: Cluster, database: str
) -> None:
    a, b = two_sharded_coordinators(cluster, database)
    # Given one coordinator's worker port, the worker registers with every shard.
    worker = cluster.py_worker(
        None,
        "py-shards",
        "--coordinator-host",
        f"{HOST}:{a.worker_port}",
        "--shard-refresh-millis",
        "200",
        tasks=TASKS,
        capacity=8,
        wait=False,
    )
    worker.wait_for(r"sharded coordinator: one session per shard leader .*shards=4")
    queues = [f"tenant-{i}" for i in range(8)]
    assert {shard_of_queue(q, 4) for q in queues} == {0, 1, 2, 3}
    with dtp.Client(f"{a.client_address},{b.client_address}") as client:
        jobs = [
            client.submit("py.upper", {"text": q}, queue=q, idempotency_key=f"up-{q}")
            for q in queues
        ]
        for job, queue in zip(jobs, queues):
            # The coordinator put each job in the shard the worker computes for its queue.
            assert int(job.job_id[-3:], 16) == shard_of_queue(queue, 4)
            assert job.result(timeout=30) == queue.upper()
            assert [x["workerId"] for x in client.attempts(job.job_id)] == ["py-shards"]

        # The coordinator the worker was pointed at dies with attempts running on the
        # shards it led: the other takes them over, the worker follows (asking the
        # survivor, which the maps named, for where they went), and every job completes.
        slow = [
            client.submit("py.sleep", {"seconds": 1.5}, queue=q, idempotency_key=f"slow-{q}")
            for q in queues
        ]
        for job in slow:
            worker.wait_for(rf"task started jobId={job.job_id} ", 30)
        a.proc.signal(signal.SIGKILL)
        done = [job.wait(timeout=60) for job in slow]
        assert [d["state"] for d in done] == ["COMPLETED"] * len(slow), done
        assert client.address == b.client_address
        after = [
            client.submit("py.upper", {"text": q}, queue=q, idempotency_key=f"after-{q}")
            for q in queues
        ]
        assert [job.result(timeout=60) for job in after] == [q.upper() for q in queues]
    with b.client() as client:
        assert sorted(c["shards"] for c in client.shards()["coordinators"]) == [4]
