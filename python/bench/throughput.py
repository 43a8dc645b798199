"""Throughput of a Python worker against the TypeScript worker, same machine,
same coordinator build, same jobs; and the cost of the process hop.

    python bench/throughput.py [--jobs 2000] [--runs 3] [--capacity 4]

For each run and each worker kind: a fresh coordinator (in memory), ``--jobs``
SHA256 jobs (1 KiB of text each) queued first, then one worker with
``--capacity`` slots started; throughput is jobs / (last finish - first
start), from the coordinator's own timestamps, so submitting and starting
the worker are not counted. The kinds alternate within a run.

The process hop: a pool of one task process runs trivial attempts one after
another; each one's round trip (worker -> task process -> worker) against
calling the handler in place. Prints Markdown tables; needs ``npm run build``
and the package installed (or ``PYTHONPATH=python/src``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import dtp
from dtp.worker.pool import TaskPool

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "dist" / "src" / "cli"
HOST = "127.0.0.1"


def start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()


def one_run(kind: str, jobs: int, capacity: int, folder: Path) -> float:
    """Jobs per second of one worker of ``kind`` (``python`` or ``typescript``)."""
    clog = folder / f"coordinator-{kind}.log"
    worker_port, client_port = free_port(), free_port()
    coordinator = start(
        [
            "node",
            str(CLI / "coordinator-main.js"),
            "--bind-host",
            HOST,
            "--worker-port",
            str(worker_port),
            "--client-port",
            str(client_port),
            "--database",
            ":memory:",
            "--log-level",
            "warn",
        ],
        clog,
    )
    worker = None
    try:
        wait_listening(client_port, coordinator, clog)
        text = "x" * 1024
        with dtp.Client(f"{HOST}:{client_port}") as client:
            ids = [client.submit("SHA256", {"text": f"{n}{text}"}).job_id for n in range(jobs)]
            wlog = folder / f"worker-{kind}.log"
            common = [
                "--coordinator-host",
                HOST,
                "--coordinator-port",
                str(worker_port),
                "--id",
                f"bench-{kind}",
                "--capacity",
                str(capacity),
                "--log-level",
                "warn",
            ]
            if kind == "python":
                worker = start([sys.executable, "-m", "dtp.worker", *common], wlog)
            else:
                worker = start(["node", str(CLI / "worker-main.js"), *common], wlog)
            client.wait(ids[-1], timeout=600)
            snapshots = [client.wait(job_id, timeout=600) for job_id in ids]
        assert all(s["state"] == "COMPLETED" for s in snapshots)
        first = min(int(s.get("startedAtMillis") or 0) for s in snapshots)
        last = max(int(s.get("finishedAtMillis") or 0) for s in snapshots)
        return jobs / max(0.001, (last - first) / 1000)
    finally:
        if worker is not None:
            stop(worker)
        stop(coordinator)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def wait_listening(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the coordinator exited: {log.read_text()[-2000:]}")
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError("the coordinator did not listen")


async def process_hop(attempts: int) -> tuple[float, float]:
    """Median microseconds of one attempt through a task process, and of a direct call."""
    pool = TaskPool(1, [], cancel_grace=1.0, queue_limit=0)
    answer = await pool.start()
    assert answer["type"] == "LOADED", answer
    times = []
    try:
        for n in range(attempts):
            run: dict[str, Any] = {
                "taskType": "SHA256",
                "payload": {"text": "abc"},
                "jobId": f"j{n}",
                "attemptId": f"a{n}",
                "attemptNumber": 1,
                "maxAttempts": None,
                "deadlineAtMs": None,
            }
            began = time.perf_counter()
            outcome = await pool.run(run, lambda *_: None).outcome
            times.append(time.perf_counter() - began)
            assert outcome.success
    finally:
        await pool.close()
    from dtp.builtin_tasks import sha256
    from dtp.tasks import TaskContext

    ctx = TaskContext(
        job_id="j",
        attempt_id="a",
        attempt_number=1,
        max_attempts=None,
        deadline_at_ms=None,
        task_type="SHA256",
    )
    direct = []
    for _ in range(attempts):
        began = time.perf_counter()
        sha256({"text": "abc"}, ctx)
        direct.append(time.perf_counter() - began)
    return statistics.median(times) * 1e6, statistics.median(direct) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--capacity", type=int, default=4)
    args = parser.parse_args()
    results: dict[str, list[float]] = {"typescript": [], "python": []}
    with tempfile.TemporaryDirectory(prefix="dtp-py-bench-") as folder:
        for _ in range(args.runs):
            for kind in ("typescript", "python"):
                results[kind].append(one_run(kind, args.jobs, args.capacity, Path(folder)))
    ts = statistics.median(results["typescript"])
    py = statistics.median(results["python"])
    print(
        f"SHA256 jobs (1 KiB text), {args.jobs} per run, capacity {args.capacity}, "
        f"median of {args.runs}\n"
    )
    print("| worker | jobs/s (median) | runs |\n| --- | --- | --- |")
    for kind, values in results.items():
        print(
            f"| {kind} | {statistics.median(values):,.0f} | "
            f"{', '.join(f'{v:,.0f}' for v in values)} |"
        )
    print(f"\nPython / TypeScript: {py / ts:.2f}\n")
    hop, direct = asyncio.run(process_hop(2000))
    print("| one SHA256 attempt of 3 bytes | median µs |\n| --- | --- |")
    print(f"| through a task process (pipe out and back) | {hop:,.0f} |")
    print(f"| the handler called in place | {direct:,.1f} |")


if __name__ == "__main__":
    main()
