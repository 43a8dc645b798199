"""Real processes for the tests: coordinators, TypeScript workers and the
TypeScript client CLI from this repository's build (``npm run build``), and
Python workers (``python -m dtp.worker`` of the interpreter running the tests).

Every process runs in a session of its own, logs to a file in the test's
folder, and is ended (its whole process group) when the test ends. Waiting is
always on an event: a log line, a job state, a predicate, each with a deadline.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Callable, TypeVar

import dtp

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "dist" / "src" / "cli"
HOST = "127.0.0.1"

T = TypeVar("T")


def until(predicate: Callable[[], T | None], timeout: float, what: str, every: float = 0.02) -> T:
    """The first truthy value of ``predicate()``; AssertionError naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


def node() -> str:
    return os.environ.get("DTP_TEST_NODE", "node")


class Proc:
    """A process whose output (stdout and stderr) goes to ``<dir>/<name>.log``."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        cwd: Path,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = cwd / f"{name}.log"
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("DTP_")}
        full_env["PYTHONUNBUFFERED"] = "1"
        full_env.update(env or {})
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            self.argv,
            cwd=cwd,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.pid = self.popen.pid

    @property
    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_for(self, pattern: str, timeout: float = 20.0, after: int = 0) -> re.Match[str]:
        """The first match of ``pattern`` in the output (from character ``after``)."""
        regex = re.compile(pattern)

        def found() -> re.Match[str] | None:
            match = regex.search(self.output, after)
            if match is None and self.popen.poll() is not None:
                match = regex.search(self.output, after)
                if match is None:
                    raise AssertionError(
                        f"{self.name} exited ({self.popen.returncode}) before printing "
                        f"{pattern!r}:\n{self.output[-3000:]}"
                    )
            return match

        try:
            return until(found, timeout, f"{self.name} to print {pattern!r}")
        except AssertionError as err:
            raise AssertionError(f"{err}\n--- {self.name}:\n{self.output[-3000:]}") from None

    def wait_exit(self, timeout: float = 20.0) -> int:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.name} did not exit within {timeout} s:\n{self.output[-3000:]}"
            ) from None

    def signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def stop(self) -> None:
        """Ends the process and everything in its session (SIGTERM, then SIGKILL)."""
        if self.popen.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGCONT)
                os.killpg(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(5)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.popen.poll() is None:
            self.popen.wait(5)
        self._log.close()


class Coordinator:
    def __init__(self, proc: Proc, worker_port: int, client_port: int) -> None:
        self.proc = proc
        self.worker_port = worker_port
        self.client_port = client_port

    @property
    def client_address(self) -> str:
        return f"{HOST}:{self.client_port}"

    def client(self, **options: Any) -> dtp.Client:
        return dtp.Client(self.client_address, **options)

    def wait_registered(self, worker_id: str, timeout: float = 30.0, after: int = 0) -> None:
        self.proc.wait_for(rf"worker registered workerId={re.escape(worker_id)}\b", timeout, after)


FAST_COORDINATOR = [
    "--heartbeat-timeout-millis",
    "1500",
    "--sweep-interval-millis",
    "50",
    "--retry-base-delay-millis",
    "50",
    "--retry-max-delay-millis",
    "200",
]


class Cluster:
    """The processes of one test, stopped together."""

    def __init__(self, folder: Path) -> None:
        self.dir = folder
        self.procs: list[Proc] = []
        self._count = 0

    def _name(self, base: str) -> str:
        self._count += 1
        return f"{self._count:02d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', base)}"

    def start(self, base: str, argv: Sequence[str], env: dict[str, str] | None = None) -> Proc:
        proc = Proc(self._name(base), argv, self.dir, env)
        self.procs.append(proc)
        return proc

    def coordinator(
        self,
        *args: str,
        fast: bool = True,
        env: dict[str, str] | None = None,
        ports: tuple[int, int] = (0, 0),
    ) -> Coordinator:
        argv = [
            node(),
            str(CLI / "coordinator-main.js"),
            "--bind-host",
            HOST,
            "--worker-port",
            str(ports[0]),
            "--client-port",
            str(ports[1]),
            *(["--database", ":memory:"] if "--database" not in args else []),
            *(FAST_COORDINATOR if fast else []),
            *args,
        ]
        proc = self.start("coordinator", argv, env)
        match = proc.wait_for(r'workerPort"?[=:](\d+)[ ,]"?clientPort"?[=:](\d+)', 30)
        return Coordinator(proc, int(match.group(1)), int(match.group(2)))

    def py_worker(
        self,
        coordinator: Coordinator | None,
        worker_id: str,
        *args: str,
        tasks: Path | str | None = None,
        capacity: int = 1,
        wait: bool = True,
        env: dict[str, str] | None = None,
        heartbeat_ms: int = 200,
    ) -> Proc:
        argv = [sys.executable, "-m", "dtp.worker", "--id", worker_id, "--capacity", str(capacity)]
        argv += [
            "--heartbeat-interval-millis",
            str(heartbeat_ms),
            "--reconnect-delay-millis",
            "100",
        ]
        if coordinator is not None:
            argv += ["--coordinator-host", HOST, "--coordinator-port", str(coordinator.worker_port)]
        if tasks is not None:
            argv += ["--tasks", str(tasks)]
        proc = self.start(f"pyworker-{worker_id}", [*argv, *args], env)
        if wait and coordinator is not None:
            coordinator.wait_registered(worker_id)
        return proc

    def ts_worker(
        self,
        coordinator: Coordinator,
        worker_id: str,
        *args: str,
        tasks: Path | None = None,
        capacity: int = 1,
        wait: bool = True,
    ) -> Proc:
        argv = [node(), str(CLI / "worker-main.js"), "--id", worker_id, "--capacity", str(capacity)]
        argv += ["--coordinator-host", HOST, "--coordinator-port", str(coordinator.worker_port)]
        argv += ["--heartbeat-interval-millis", "200", "--reconnect-delay-millis", "100"]
        if tasks is not None:
            argv += ["--tasks", str(tasks)]
        proc = self.start(f"tsworker-{worker_id}", [*argv, *args])
        if wait:
            coordinator.wait_registered(worker_id)
        return proc

    def cli(self, coordinator: Coordinator, *args: str) -> Any:
        """The TypeScript client CLI with ``--json``; its one JSON document."""
        argv = [node(), str(CLI / "client-main.js"), *args, "--json"]
        argv += ["--host", HOST, "--port", str(coordinator.client_port)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("DTP_")}
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=60, env=env, check=False
        )
        try:
            return json.loads(done.stdout)
        except ValueError:
            raise AssertionError(
                f"client CLI {args} printed no JSON ({done.returncode}):\n{done.stdout}\n{done.stderr}"
            ) from None

    def write(self, name: str, text: str) -> Path:
        path = self.dir / name
        path.write_text(text, encoding="utf-8")
        return path

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a live process, from /proc; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    if fields[0] in ("Z", "X"):
        return None  # exited, not yet reaped
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def children(pid: int) -> list[int]:
    """The pids of a live process's children, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    return cpu_seconds(pid) is not None


def lines(text: str) -> Iterator[str]:
    yield from text.splitlines()
