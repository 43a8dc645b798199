"""The pool of task processes on its own (in this process's event loop):
isolated attempts (``def`` handlers)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dtp.worker import pool as pool_module
from dtp.worker.pool import TaskPool

TASKS = Path(__file__).parent / "fixtures" / "py_tasks.py"


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


def test_a_queued_attempt_runs_on_the_process_that_replaces_a_killed_one() -> None:
    async def scenario() -> list[str]:
        pool = TaskPool(1, [str(TASKS)], cancel_grace=0.05, queue_limit=2)
        assert (await pool.start())["type"] == "LOADED"
        outcomes = []
        try:
            for n in range(4):
                busy = pool.run(attempt(2 * n, "py.busy", {}), lambda *_: None)
                queued = pool.run(
                    attempt(2 * n + 1, "py.upper", {"text": f"r{n}"}), lambda *_: None
                )
                assert await busy.started is not None
                assert await busy.stop("cancel") == "terminated"
                outcome = await asyncio.wait_for(queued.outcome, 30)
                outcomes.append(
                    str(outcome.result) if outcome.success else f"failed: {outcome.error}"
                )
            # One isolated process is kept (the killed ones are gone) beside the shared one.
            assert len(pool.role_pids("isolated")) == 1
            assert len(pool.role_pids("shared")) == 1
        finally:
            await pool.close()
        return outcomes

    assert asyncio.run(scenario()) == ["R0", "R1", "R2", "R3"]


def test_a_pool_beyond_its_capacity_refuses_and_a_crash_frees_the_slot() -> None:
    async def scenario() -> None:
        pool = TaskPool(1, [str(TASKS)], cancel_grace=1.0, queue_limit=0)
        assert (await pool.start())["type"] == "LOADED"
        try:
            crash = pool.run(attempt(1, "py.exit", {}), lambda *_: None)
            refused = pool.run(attempt(2, "py.upper", {"text": "x"}), lambda *_: None)
            assert (await refused.outcome).error == "task pool at capacity (1)"
            failed = await crash.outcome
            assert failed.error == "the task process exited with code 3 unexpectedly"
            after = await asyncio.wait_for(
                pool.run(attempt(3, "py.upper", {"text": "y"}), lambda *_: None).outcome, 30
            )
            assert after.result == "Y"
        finally:
            await pool.close()

    asyncio.run(scenario())


def test_an_attempt_never_reaches_a_process_before_its_init() -> None:
    """A replacement process is set up over a few turns of the loop; an attempt
    that arrives meanwhile waits for it instead of overtaking its INIT."""

    async def scenario() -> list[str]:
        pool = TaskPool(1, [str(TASKS)], cancel_grace=1.0, queue_limit=1)
        assert (await pool.start())["type"] == "LOADED"
        results = []
        try:
            for turns in range(8):
                crash = await pool.run(attempt(turns, "py.exit", {}), lambda *_: None).outcome
                assert not crash.success
                for _ in range(turns):
                    await asyncio.sleep(0)
                nxt = pool.run(attempt(100 + turns, "py.upper", {"text": "ok"}), lambda *_: None)
                outcome = await asyncio.wait_for(nxt.outcome, 15)
                results.append(str(outcome.result) if outcome.success else str(outcome.error))
        finally:
            await pool.close()
        return results

    assert asyncio.run(scenario()) == ["OK"] * 8


def test_isolated_processes_beyond_the_ones_kept_end_when_left_without_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pool_module, "ISOLATED_LINGER_S", 0.3)

    async def scenario() -> None:
        pool = TaskPool(3, [str(TASKS)], cancel_grace=1.0, queue_limit=0, processes=1)
        assert (await pool.start())["type"] == "LOADED"
        try:
            assert pool.isolated_kept == 1 and len(pool.role_pids("isolated")) == 1
            runs = [
                pool.run(attempt(n, "py.sleep", {"seconds": 0.3}), lambda *_: None)
                for n in range(3)
            ]
            done = await asyncio.wait_for(asyncio.gather(*(r.outcome for r in runs)), 30)
            assert all(o.success for o in done)
            assert len({r.started.result() for r in runs}) == 3  # a process each
            deadline = asyncio.get_running_loop().time() + 10
            while len(pool.role_pids("isolated")) > 1:
                assert asyncio.get_running_loop().time() < deadline, pool.role_pids("isolated")
                await asyncio.sleep(0.05)
        finally:
            await pool.close()

    asyncio.run(scenario())
