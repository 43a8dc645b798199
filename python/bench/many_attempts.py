"""Memory of a Python worker that holds many attempts at once: one worker,
``--capacity`` attempts of an ``async def`` handler that awaits ``--seconds``,
``--jobs`` jobs.

    python bench/many_attempts.py [--jobs 5000] [--capacity 500] [--seconds 1] [--processes N]

A fresh coordinator (in memory) gets the jobs first, then one worker
(``python -m dtp.worker``, its task module written to a temporary folder)
is started. While the jobs run, the resident memory (RSS, from /proc) of the
worker and of each of its task processes is read every 50 ms; the peak of
their sum is printed (an upper bound: pages two processes share count
twice), with the most task processes seen and the time from the first
attempt's start to the last one's end (the coordinator's timestamps). Needs
``npm run build``, Linux (/proc), and the package installed (or
``PYTHONPATH=python/src``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import dtp
from throughput import CLI, HOST, free_port, start, stop, wait_listening

TASK_MODULE = """
import asyncio
import dtp


@dtp.task("bench.await")
async def await_timer(payload, ctx):
    await asyncio.sleep(payload["seconds"])
    return "done"
"""


def rss_kib(pid: int) -> int:
    """Resident memory of a process, in KiB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return found


class Sampler(threading.Thread):
    """Reads the memory of a process and its children every 50 ms until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_kib = 0
        self.peak_worker_kib = 0
        self.most_children = 0
        self.samples = 0
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(0.05):
            kids = children(self.pid)
            worker = rss_kib(self.pid)
            self.peak_worker_kib = max(self.peak_worker_kib, worker)
            self.peak_kib = max(self.peak_kib, worker + sum(rss_kib(k) for k in kids))
            self.most_children = max(self.most_children, len(kids))
            self.samples += 1

    def stop(self) -> None:
        self._stopped.set()
        self.join()


def measure(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    worker_port, client_port = free_port(), free_port()
    clog = folder / "coordinator.log"
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
    sampler = None
    try:
        wait_listening(client_port, coordinator, clog)
        (folder / "bench_tasks.py").write_text(TASK_MODULE, encoding="utf-8")
        with dtp.Client(f"{HOST}:{client_port}") as client:
            job = {"task_type": "bench.await", "payload": {"seconds": args.seconds}}
            ids: list[str] = []
            while len(ids) < args.jobs:
                ids += client.submit_many([job] * min(1000, args.jobs - len(ids)))
            argv = [sys.executable, "-m", "dtp.worker", "--tasks", str(folder / "bench_tasks.py")]
            argv += ["--coordinator-host", HOST, "--coordinator-port", str(worker_port)]
            argv += ["--id", "bench-many", "--capacity", str(args.capacity), "--log-level", "warn"]
            if args.processes is not None:
                argv += ["--processes", str(args.processes)]
            worker = start(argv, folder / "worker.log")
            sampler = Sampler(worker.pid)
            sampler.start()
            snapshots = [client.wait(job_id, timeout=600) for job_id in ids]
            sampler.stop()
    finally:
        if sampler is not None and sampler.is_alive():
            sampler.stop()
        if worker is not None:
            stop(worker)
        stop(coordinator)
    assert all(s["state"] == "COMPLETED" and s["attempts"] == 1 for s in snapshots)
    first = min(int(s.get("startedAtMillis") or 0) for s in snapshots)
    last = max(int(s.get("finishedAtMillis") or 0) for s in snapshots)
    return {
        "span_s": (last - first) / 1000,
        "peak_mb": sampler.peak_kib / 1024,
        "worker_mb": sampler.peak_worker_kib / 1024,
        "processes": sampler.most_children,
        "samples": sampler.samples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--capacity", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--processes", type=int, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dtp-py-many-") as folder:
        m = measure(args, Path(folder))
    print(
        f"{args.jobs} jobs, each awaiting {args.seconds:g} s, on one worker with capacity "
        f"{args.capacity} ({m['samples']} samples of memory)\n"
    )
    print("| peak RSS, worker + task processes | of it, the worker | task processes | span |")
    print("| --- | --- | --- | --- |")
    print(
        f"| {m['peak_mb']:,.0f} MB | {m['worker_mb']:,.0f} MB | {m['processes']} "
        f"| {m['span_s']:,.1f} s ({args.jobs / max(m['span_s'], 0.001):,.0f} jobs/s) |"
    )


if __name__ == "__main__":
    main()
