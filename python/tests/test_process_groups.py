"""What a handler starts ends with its attempt: every task process leads a
process group of its own, and the processes a handler starts (a child, an
orphan whose parent has exited, a fork) are ended when the attempt returns
and leaves them running, when it is cancelled, when the pool closes and when
the worker dies; a killed task process is reaped even while a process that
left its group holds its pipe open. And SIGTERM still ends what a handler
starts, though the task process itself lets it pass."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dtp.worker.pool import TaskPool
from dtp.worker.pool_task import TaskHandle
from fakes import FakeServer
from support import Cluster, until

TASKS = Path(__file__).parent / "fixtures" / "py_tasks.py"


def exists(pid: int) -> bool:
    """True while ``pid`` names a process, a zombie (ended, not reaped) included."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def gone(pids: list[int]) -> bool:
    """True once none of ``pids`` runs any more; a zombie counts as ended here
    (an orphan's is reaped by whichever process adopted it, not by us)."""
    return not any(exists(pid) and not _zombie(pid) for pid in pids)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


@pytest.fixture
def strays() -> Iterator[list[int]]:
    """Pids the test must end itself if it fails before they end (by pid, SIGKILL)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            if (
                b"sleep" in cmdline or b"dtp.worker._child" in cmdline
            ):  # still the process it was, not a newcomer given its pid
                os.kill(pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


def attempt(n: int, task_type: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "taskType": task_type,
        "payload": payload,
        "jobId": f"j{n}",
        "attemptId": f"a{n}",
        "attemptNumber": 1,
        "maxAttempts": None,
        "deadlineAtMs": None,
    }


async def eventually(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)


def read_pids(path: Path) -> list[int] | None:
    try:
        pids = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return [int(p) for p in pids]


def with_pool(scenario: Callable[[TaskPool], Awaitable[None]], grace: float = 0.1) -> None:
    async def run() -> None:
        pool = TaskPool(1, [str(TASKS)], cancel_grace=grace, queue_limit=2)
        assert (await pool.start())["type"] == "LOADED"
        try:
            await scenario(pool)
        finally:
            await pool.close()

    asyncio.run(run())


async def blocking_spawn(
    pool: TaskPool, pid_file: Path, strays: list[int]
) -> tuple[TaskHandle, list[int]]:
    handle = pool.run(
        attempt(1, "py.spawn", {"block": True, "pidFile": str(pid_file)}), lambda *_: None
    )
    await eventually(lambda: read_pids(pid_file) is not None, "the handler's pids")
    pids = read_pids(pid_file)
    assert pids is not None
    strays += pids
    assert all(exists(pid) for pid in pids)
    return handle, pids


def test_processes_an_attempt_leaves_running_end_with_it(strays: list[int]) -> None:
    async def scenario(pool: TaskPool) -> None:
        run = pool.run(attempt(1, "py.spawn", {}), lambda *_: None)
        outcome = await asyncio.wait_for(run.outcome, 30)
        assert outcome.success, outcome.error
        started = run.started.result()
        assert started is not None
        task_process: int = started
        pids = json.loads(str(outcome.result))
        strays.extend(pids)
        assert len(pids) == 3
        await eventually(lambda: gone(pids), "the handler's processes to end")
        await eventually(lambda: not exists(task_process), "its task process to be reaped")
        after = await asyncio.wait_for(
            pool.run(attempt(2, "py.upper", {"text": "next"}), lambda *_: None).outcome, 30
        )
        assert after.result == "NEXT"
        assert len(pool.role_pids("isolated")) == 1 and task_process not in pool.pids

    with_pool(scenario)


def test_programs_and_forks_of_a_handler_end_on_sigterm_as_usual() -> None:
    """The task process lets SIGTERM pass it by; what a handler starts gets it as usual."""

    async def scenario(pool: TaskPool) -> None:
        run = pool.run(attempt(1, "py.terminate", {}), lambda *_: None)
        outcome = await asyncio.wait_for(run.outcome, 30)
        assert (outcome.success, outcome.result) == (True, "[-15,-15]"), outcome.error

    with_pool(scenario)


def test_a_cancel_ends_the_handlers_processes_and_reaps_its_process(
    tmp_path: Path, strays: list[int]
) -> None:
    async def scenario(pool: TaskPool) -> None:
        handle, pids = await blocking_spawn(pool, tmp_path / "pids.json", strays)
        assert await asyncio.wait_for(handle.stop("cancel"), 10) == "terminated"
        await eventually(lambda: gone(pids[1:]), "the handler's processes to end")
        await eventually(lambda: not exists(pids[0]), "the task process to be reaped")

    with_pool(scenario)


def test_a_killed_task_process_is_reaped_while_an_escaped_process_holds_its_pipe(
    tmp_path: Path, strays: list[int]
) -> None:
    async def scenario(pool: TaskPool) -> None:
        pid_file = tmp_path / "pids.json"
        handle = pool.run(attempt(1, "py.escape", {"pidFile": str(pid_file)}), lambda *_: None)
        await eventually(lambda: read_pids(pid_file) is not None, "the handler's pids")
        pids = read_pids(pid_file)
        assert pids is not None
        strays.extend(pids)
        task_process, escaped = pids
        assert await asyncio.wait_for(handle.stop("cancel"), 10) == "terminated"
        await eventually(lambda: not exists(task_process), "the task process to be reaped")
        assert exists(escaped), "a process that left the group is beyond it"

    with_pool(scenario)


def test_closing_the_pool_ends_what_its_handlers_started(tmp_path: Path, strays: list[int]) -> None:
    async def run() -> list[int]:
        pool = TaskPool(1, [str(TASKS)], cancel_grace=5.0, queue_limit=2)
        assert (await pool.start())["type"] == "LOADED"
        try:
            _, pids = await blocking_spawn(pool, tmp_path / "pids.json", strays)
        finally:
            await pool.close()
        return pids

    pids = asyncio.run(run())
    until(lambda: gone(pids), 10, "the handler's processes to end")
    assert not exists(pids[0]), "the task process was reaped"


def test_a_worker_that_dies_takes_its_tasks_processes_along(
    cluster: Cluster, tmp_path: Path, strays: list[int]
) -> None:
    server = FakeServer()
    try:
        worker = cluster.py_worker(
            None, "doomed", "--coordinator-host", f"127.0.0.1:{server.port}", tasks=TASKS
        )
        conn = server.next_connection()
        hello = conn.recv()
        assert hello is not None and hello["type"] == "WORKER_REGISTER"
        conn.send({"type": "WORKER_REGISTERED", "workerId": "doomed", "features": []})
        pid_file = tmp_path / "pids.json"
        conn.send(
            {
                "type": "TASK_ASSIGN",
                "jobId": "j",
                "attemptId": "a",
                "attemptNumber": 1,
                "taskType": "py.spawn",
                "payload": {"block": True, "pidFile": str(pid_file)},
            }
        )
        pids = until(lambda: read_pids(pid_file), 30, "the handler's pids")
        strays.extend(pids)
        worker.signal(signal.SIGKILL)
        worker.wait_exit(10)
        until(lambda: gone(pids), 10, "the task process and the handler's processes to end")
    finally:
        server.stop()
