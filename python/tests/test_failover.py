"""Two coordinators sharing PostgreSQL, one leading: a Python worker and a
Python client given both addresses find the leader, and follow it when it is
killed and the standby takes over. Needs DTP_TEST_PG_URL (npm test starts a
server) and psql; skipped without them, except in CI."""

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


def test_a_client_reaches_every_shard_through_any_sharded_coordinator(
    cluster: Cluster, database: str
) -> None:
    lease = ["--lease-ttl-millis", "1000", "--lease-renew-interval-millis", "200"]
    a = cluster.coordinator("--database", database, "--shards", "4", *lease)
    b = cluster.coordinator("--database", database, "--shards", "4", *lease)

    def shared_out() -> bool:
        with a.client() as client:
            counts = sorted(c["shards"] for c in client.shards()["coordinators"])
        return counts == [2, 2]

    until(shared_out, 30, "the shards shared out")
    queues = [f"tenant-{i}" for i in range(8)]
    with a.client() as via_a, b.client() as via_b:
        ids = [via_a.submit("SLEEP", {"durationMillis": 1}, queue=q).job_id for q in queues]
        assert {int(i[-3:], 16) for i in ids} == {0, 1, 2, 3}, "every shard has a job"
        for job_id, queue in zip(ids, queues):
            job = via_b.status(job_id)
            assert (job["queue"], job["state"]) == (queue, "QUEUED")
        assert via_b.cancel(ids[0])["cancelled"] is True
