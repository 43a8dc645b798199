"""A Python worker that holds many attempts at once: a thousand awaiting
timers on a few processes, a handler that blocks its process's loop, a
shared attempt that ignores its stop (its neighbours requeued without using
an attempt), an isolated spinning task beside shared ones, capacities above
1,024 (``slots``), and the bounds of the new flags."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path
from typing import Any, cast

import pytest

import dtp
from dtp.protocol import MAX_CAPACITY
from dtp.worker.cli import parse_args
from dtp.worker.options import WorkerOptions
from fakes import FakeConn, FakeServer
from support import HOST, Cluster, Coordinator, Proc, alive, children, cpu_seconds, until

TASKS = Path(__file__).parent / "fixtures" / "py_tasks.py"


def assign(job: str, task_type: str, payload: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "type": "TASK_ASSIGN",
        "jobId": job,
        "attemptId": f"{job}-a{extra.get('attemptNumber', 1)}",
        "attemptNumber": 1,
        "taskType": task_type,
        "payload": payload,
        **extra,
    }


def started_pid(worker: Proc, job_id: str) -> int:
    line = worker.wait_for(rf"task started jobId={re.escape(job_id)} .*pid=(\d+)")
    return int(line.group(1))


def wait_all(client: dtp.Client, job_ids: list[str]) -> list[dict[str, Any]]:
    # As plain dicts: these tests read fields they know are there.
    return [cast("dict[str, Any]", client.wait(job_id, timeout=60)) for job_id in job_ids]


def test_a_thousand_attempts_awaiting_timers_on_one_worker(cluster: Cluster) -> None:
    c = cluster.coordinator()
    worker = cluster.py_worker(c, "py-many", "--processes", "2", tasks=TASKS, capacity=1000)
    peak = 0
    with c.client() as client:
        began = time.monotonic()
        jobs = [{"task_type": "py.await", "payload": {"seconds": 1.0}} for _ in range(1000)]
        ids = client.submit_many(jobs)

        def done() -> bool:
            nonlocal peak
            peak = max(peak, len(children(worker.pid)))
            return sum(1 for _ in client.list(state="COMPLETED")) == len(ids)

        until(done, 60, "a thousand jobs to complete", every=0.2)
        took = time.monotonic() - began
        snapshots = wait_all(client, ids)
    assert all(s["attempts"] == 1 for s in snapshots)
    pids = {int(s["result"]) for s in snapshots}
    assert len(pids) == 2, pids  # the two shared processes ran them all
    # Two shared processes and the two isolated ones kept for the def handlers.
    assert peak <= 4, f"{peak} task processes"
    assert took < 45, f"a thousand 1-second attempts took {took:.1f} s"


def test_a_blocking_handler_beside_awaiting_ones_loses_nothing(cluster: Cluster) -> None:
    c = cluster.coordinator()  # a worker silent for 1.5 s is lost
    worker = cluster.py_worker(c, "py-blocks", "--processes", "2", tasks=TASKS, capacity=100)
    with c.client() as client:
        blocker = client.submit("py.block", {"seconds": 3.0}, max_attempts=1)
        blocked = started_pid(worker, blocker.job_id)
        line = worker.wait_for(r"task process not answering .*jobIds=(\S+)")
        assert line.group(1) == blocker.job_id
        jobs = [{"task_type": "py.await", "payload": {"seconds": 0.2}, "max_attempts": 1}] * 50
        snapshots = wait_all(client, client.submit_many(jobs))
        held = blocker.wait(timeout=30)
    assert held["state"] == "COMPLETED" and int(held["result"] or 0) == blocked
    for s in snapshots:
        assert (s["state"], s["attempts"]) == ("COMPLETED", 1)
        assert int(s["result"]) != blocked
        assert s["finishedAtMillis"] < held["finishedAtMillis"]
    assert "worker lost" not in c.proc.output and "suspected dead" not in c.proc.output
    worker.wait_for(r"task process answers again pid=\d+ blockedMs=\d+")


def registered(server: FakeServer, features: list[str]) -> tuple[FakeConn, dict[str, Any]]:
    conn = server.next_connection()
    hello = conn.recv()
    assert hello is not None and hello["type"] == "WORKER_REGISTER"
    conn.send({"type": "WORKER_REGISTERED", "workerId": hello["workerId"], "features": features})
    return conn, hello


def stubborn_neighbours(cluster: Cluster, features: list[str]) -> list[dict[str, Any]]:
    """Twenty attempts awaiting beside one that ignores its cancel, on one shared
    process; the results of the twenty once that process was ended."""
    server = FakeServer()
    try:
        worker = cluster.py_worker(
            None,
            "py-stubborn",
            "--coordinator-host",
            f"{HOST}:{server.port}",
            "--processes",
            "1",
            "--cancel-grace-millis",
            "300",
            tasks=TASKS,
            capacity=50,
        )
        conn, _ = registered(server, features)
        for n in range(20):
            conn.send(assign(f"n{n}", "py.await", {"seconds": 30}, maxAttempts=1))
        conn.send(assign("stubborn", "py.stubborn", {}, maxAttempts=1))
        shared = {started_pid(worker, f"n{n}") for n in range(20)}
        assert shared == {started_pid(worker, "stubborn")}
        conn.send({"type": "TASK_CANCEL", "jobId": "stubborn", "attemptId": "stubborn-a1"})
        results = [conn.recv(timeout=15) for _ in range(20)]
        assert all(r is not None for r in results)
        worker.wait_for(r"task stopped: its process was killed jobId=stubborn .*reason=cancel")
        if "requeue" in features:
            # As the coordinator does: at once, and the attempt did not count.
            for n in range(20):
                conn.send(
                    assign(f"n{n}", "py.await", {"seconds": 0.1}, attemptNumber=2, maxAttempts=1)
                )
            again = [conn.recv(timeout=15) for _ in range(20)]
            assert all(r is not None and r["success"] for r in again), again
        return [r for r in results if r is not None]
    finally:
        server.stop()


WHY = (
    "its task process was ended because another attempt on it (job stubborn) "
    "did not stop within the cancel grace (300 ms)"
)


def test_a_stubborn_shared_attempt_has_its_neighbours_requeued(cluster: Cluster) -> None:
    results = stubborn_neighbours(cluster, ["requeue", "retryable", "assignLimits"])
    assert sorted(r["jobId"] for r in results) == sorted(f"n{n}" for n in range(20))
    for r in results:
        assert (r["success"], r.get("requeue"), r["error"]) == (False, True, WHY)
        assert "retryable" not in r


def test_without_requeue_the_neighbours_fail_retryable(cluster: Cluster) -> None:
    for r in stubborn_neighbours(cluster, ["retryable"]):
        assert (r["success"], r["error"]) == (False, WHY)
        assert "requeue" not in r and "retryable" not in r  # retryable: the default


def coordinator_features(c: Coordinator) -> set[str]:
    return set(c.proc.wait_for(r"coordinator started .*features=(\S+)").group(1).split(","))


def test_with_a_coordinator_that_requeues_neighbours_complete_on_one_attempt(
    cluster: Cluster,
) -> None:
    c = cluster.coordinator()
    if "requeue" not in coordinator_features(c):
        pytest.skip("this build's coordinator does not offer requeue: the fake one stands in")
    worker = cluster.py_worker(
        c,
        "py-requeued",
        "--processes",
        "1",
        "--cancel-grace-millis",
        "300",
        tasks=TASKS,
        capacity=50,
    )
    with c.client() as client:
        jobs = [{"task_type": "py.await", "payload": {"seconds": 3}, "max_attempts": 1}] * 20
        ids = client.submit_many(jobs)
        stubborn = client.submit("py.stubborn", {}, max_attempts=1)
        for job_id in [*ids, stubborn.job_id]:
            started_pid(worker, job_id)
        client.cancel(stubborn.job_id)
        for s in wait_all(client, ids):
            assert (s["state"], s["attempts"], s.get("requeues")) == ("COMPLETED", 2, 1), s
            assert client.attempts(s["jobId"])[0]["outcome"] == "REQUEUED"


def test_an_isolated_spinning_task_does_not_delay_shared_ones(cluster: Cluster) -> None:
    grace_ms = 300
    c = cluster.coordinator()
    worker = cluster.py_worker(
        c,
        "py-spinning",
        "--processes",
        "1",
        "--cancel-grace-millis",
        str(grace_ms),
        tasks=TASKS,
        capacity=30,
    )
    with c.client() as client:
        spinner = client.submit("py.busy", {}, max_attempts=1)
        pid = started_pid(worker, spinner.job_id)
        first = cpu_seconds(pid) or 0
        until(lambda: (cpu_seconds(pid) or 0) > first + 0.05, 10, "the spinner to burn CPU")
        jobs = [{"task_type": "py.await", "payload": {"seconds": 0.5}, "max_attempts": 1}] * 20
        for s in wait_all(client, client.submit_many(jobs)):
            assert (s["state"], s["attempts"]) == ("COMPLETED", 1)
            ran_ms = s["finishedAtMillis"] - s["startedAtMillis"]
            assert ran_ms < 2500, f"a 0.5 s attempt beside the spinner took {ran_ms} ms"
            assert int(s["result"]) != pid
        assert client.status(spinner.job_id)["state"] == "RUNNING"
        client.cancel(spinner.job_id)
        line = worker.wait_for(
            rf"task stopped: its process was killed jobId={spinner.job_id} .*stopMs=(\d+)"
        )
        assert grace_ms <= int(line.group(1)) < grace_ms + 2500
        until(lambda: not alive(pid), 10, "the spinner's process to end")


def test_a_capacity_above_1024_is_registered_as_slots(cluster: Cluster) -> None:
    capacity = MAX_CAPACITY + 1
    cases: list[tuple[list[str], int]] = [([], MAX_CAPACITY), (["slots"], capacity)]
    for features, held in cases:
        server = FakeServer()
        try:
            worker = cluster.py_worker(
                None,
                f"py-slots-{len(features)}",
                "--coordinator-host",
                f"{HOST}:{server.port}",
                "--processes",
                "1",
                "--drain-timeout-millis",
                "100",
                tasks=TASKS,
                capacity=capacity,
            )
            conn, hello = registered(server, features)
            assert (hello["capacity"], hello["slots"], hello["prefetch"]) == (1024, 1025, 2050)
            for n in range(capacity + 1):
                conn.send(assign(f"j{n}", "SLEEP", {"durationMillis": 60_000}))
            refused = [conn.recv(timeout=30) for _ in range(capacity + 1 - held)]
            assert [(r or {}).get("error") for r in refused] == ["worker at capacity"] * len(
                refused
            )
            assert [(r or {}).get("jobId") for r in refused] == [
                f"j{n}" for n in range(held, capacity + 1)
            ]
            if not features:  # warned once, not again when it registers anew
                conn.close()
                registered(server, features)
                worker.wait_for(r"registered coordinator=.*\n(.|\n)*registered coordinator=")
                assert worker.output.count("coordinator does not offer slots") == 1
            worker.signal(signal.SIGTERM)
            assert worker.wait_exit(30) == 0
        finally:
            server.stop()


def test_with_a_coordinator_that_offers_slots_the_whole_capacity_is_used(
    cluster: Cluster,
) -> None:
    c = cluster.coordinator()
    if "slots" not in coordinator_features(c):
        pytest.skip("this build's coordinator does not offer slots: the fake one stands in")
    worker = cluster.py_worker(c, "py-wide", "--processes", "1", tasks=TASKS, capacity=1500)
    line = worker.wait_for(r"registered coordinator=\S+ capacity=(\d+) features=(\S+)")
    assert line.group(1) == "1500" and "slots" in line.group(2).split(",")
    with c.client() as client:
        (listed,) = client.workers()
        assert listed["capacity"] == 1500
        jobs = [{"task_type": "py.await", "payload": {"seconds": 2}, "max_attempts": 1}] * 1100
        ids = client.submit_many(jobs[:1000]) + client.submit_many(jobs[1000:])
        assert all(s["state"] == "COMPLETED" for s in wait_all(client, ids))
    assert len(re.findall(r"task started jobId=", worker.output)) == len(ids)
    assert "worker at capacity" not in worker.output
    assert "does not offer slots" not in worker.output


def test_the_bounds_of_capacity_processes_and_prefetch(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse_args(["--capacity", "10000", "--processes", "256"], {})
    assert (args.capacity, args.processes) == (10_000, 256)
    assert parse_args([], {"DTP_PROCESSES": "3"}).processes == 3
    refused: list[tuple[list[str], dict[str, str], str]] = [
        (["--capacity", "10001"], {}, "--capacity must be in 1..10000, got 10001"),
        (["--processes", "0"], {}, "--processes must be in 1..256, got 0"),
        (["--processes", "257"], {}, "--processes must be in 1..256, got 257"),
        ([], {"DTP_PROCESSES": "0"}, "--processes must be in 1..256, got 0"),
    ]
    for argv, env, problem in refused:
        with pytest.raises(SystemExit) as exited:
            parse_args(argv, env)
        assert exited.value.code == 2
        assert problem in capsys.readouterr().err
    big = WorkerOptions("w", [], capacity=3000)
    assert (big.wire_capacity, big.effective_prefetch, big.wire_prefetch) == (1024, 6000, 4096)
    with pytest.raises(ValueError, match=r"capacity must be in 1\.\.10000"):
        WorkerOptions("w", [], capacity=10_001)
    with pytest.raises(ValueError, match=r"processes must be in 1\.\.256"):
        WorkerOptions("w", [], processes=0)
