"""Shared task processes on their own (the pool in this process's event loop):
many ``async def`` attempts per process, placement away from a process whose
loop a handler blocks, a stop that a handler ignores, a crash, ``isolate=True``
and the batches on the pipes."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from dtp.framing import FrameDecoder
from dtp.worker.pipe import PIPE_FRAME_BYTES, batch_frames, encode_message, unbatch
from dtp.worker.pool import TaskPool
from dtp.worker.pool_task import Outcome, TaskHandle

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


async def eventually(predicate: Callable[[], object], what: str, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.01)


def with_pool(
    scenario: Callable[[TaskPool], Awaitable[None]],
    processes: int = 2,
    grace: float = 0.2,
    capacity: int = 100,
) -> None:
    async def run() -> None:
        pool = TaskPool(
            capacity, [str(TASKS)], cancel_grace=grace, queue_limit=0, processes=processes
        )
        assert (await pool.start())["type"] == "LOADED"
        try:
            await asyncio.wait_for(scenario(pool), 60)
        finally:
            await pool.close()

    asyncio.run(run())


def start(pool: TaskPool, n: int, task_type: str, **payload: Any) -> TaskHandle:
    return pool.run(attempt(n, task_type, payload), lambda *_: None)


async def outcomes(handles: list[TaskHandle]) -> list[Outcome]:
    return list(await asyncio.gather(*(h.outcome for h in handles)))


def test_shared_attempts_run_many_at_once_on_few_processes() -> None:
    async def scenario(pool: TaskPool) -> None:
        began = time.monotonic()
        handles = [start(pool, n, "py.await", seconds=0.5) for n in range(200)]
        done = await outcomes(handles)
        took = time.monotonic() - began
        assert all(o.success for o in done), [o for o in done if not o.success][:1]
        shared = set(pool.role_pids("shared"))
        assert {int(str(o.result)) for o in done} == shared and len(shared) == 2
        assert took < 5, f"200 attempts of 0.5 s on 2 processes took {took:.1f} s"
        # def handlers and PRIME_COUNT are isolated; the other built-ins are shared.
        assert pool.is_isolated("py.upper") and pool.is_isolated("PRIME_COUNT")
        assert not pool.is_isolated("py.await") and not pool.is_isolated("SHA256")
        sleep = start(pool, 300, "SLEEP", durationMillis=10)
        assert (await sleep.outcome).result == "slept 10 ms"
        assert sleep.started.result() in shared

    with_pool(scenario, capacity=200)


def test_isolate_true_gives_an_async_handler_a_process_of_its_own() -> None:
    async def scenario(pool: TaskPool) -> None:
        handle = start(pool, 1, "py.iso_async")
        outcome = await handle.outcome
        assert outcome.success, outcome.error
        pid = int(str(outcome.result))
        assert pid in pool.role_pids("isolated") and pid not in pool.role_pids("shared")

    with_pool(scenario)


def test_a_new_attempt_goes_to_a_process_that_answers(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="dtp.worker")

    async def scenario(pool: TaskPool) -> None:
        blocker = start(pool, 0, "py.block", seconds=2.5)
        blocked = await blocker.started
        await eventually(lambda: pool.blocked_pids == [blocked], "the process to be seen blocked")
        began = time.monotonic()
        quick = [start(pool, n, "py.await", seconds=0.05) for n in range(1, 11)]
        done = await outcomes(quick)
        assert time.monotonic() - began < 1.5, "they waited for the blocked process"
        assert all(o.success and int(str(o.result)) != blocked for o in done)
        assert not blocker.outcome.done()
        assert (await blocker.outcome).success
        await eventually(lambda: not pool.blocked_pids, "the process to answer again")

    with_pool(scenario)
    warning = next(r for r in caplog.records if "not answering" in r.getMessage())
    assert warning.levelno == logging.WARNING
    assert warning.fields["jobIds"] == "j0"  # type: ignore[attr-defined]
    assert any("answers again" in r.getMessage() for r in caplog.records)


def test_a_stop_that_a_shared_handler_ignores_ends_its_process_and_requeues_the_others() -> None:
    async def scenario(pool: TaskPool) -> None:
        (before,) = pool.role_pids("shared")
        neighbours = [start(pool, n, "py.await", seconds=30) for n in range(5)]
        polite = start(pool, 10, "py.async_wait")
        stubborn = start(pool, 11, "py.stubborn")
        for handle in [*neighbours, polite, stubborn]:
            assert await handle.started == before
        # A handler that stops when asked costs nothing to anyone.
        assert await polite.stop("cancel") == "cooperative"
        assert not any(h.outcome.done() for h in neighbours)
        stopped_at = time.monotonic()
        how = stubborn.stop("deadline")
        assert stubborn.outcome.done() and stubborn.outcome.result().cancelled  # its slot is free
        assert await how == "terminated"
        assert time.monotonic() - stopped_at >= 0.2
        for outcome in await outcomes(neighbours):
            assert (outcome.success, outcome.requeue, outcome.retryable) == (False, True, True)
            assert outcome.error == (
                "its task process was ended because another attempt on it (job j11) "
                "did not stop within the cancel grace (200 ms)"
            )
        after = start(pool, 20, "py.await", seconds=0)
        assert (await after.outcome).success
        assert pool.role_pids("shared") == [after.started.result()] != [before]

    with_pool(scenario, processes=1)


def test_a_crashed_shared_process_requeues_its_attempts() -> None:
    async def scenario(pool: TaskPool) -> None:
        others = [start(pool, n, "py.await", seconds=30) for n in range(3)]
        crash = start(pool, 3, "py.async_exit", after=0.2)
        done = await outcomes([*others, crash])
        for outcome in done:
            assert (outcome.success, outcome.requeue) == (False, True)
            assert outcome.error == (
                "the task process it shared with 3 other attempts exited with code 4 unexpectedly"
            )
        assert (await start(pool, 4, "py.await", seconds=0).outcome).success

    with_pool(scenario, processes=1)


def test_messages_on_the_pipes_travel_in_batches_that_fit_a_frame() -> None:
    small = [encode_message({"type": "RUN", "requestId": n}) for n in range(1000)]
    (one,) = batch_frames(small)  # a thousand attempts, one frame
    (batch,) = FrameDecoder(PIPE_FRAME_BYTES).feed(one)
    assert [m["requestId"] for m in unbatch(batch)] == list(range(1000))
    big = [encode_message({"type": "RUN", "requestId": n, "p": "x" * 1_000_000}) for n in range(20)]
    frames = batch_frames(big)
    assert len(frames) == 3 and all(len(f) <= PIPE_FRAME_BYTES + 4 for f in frames)
    decoder = FrameDecoder(PIPE_FRAME_BYTES)
    back = [m for f in frames for message in decoder.feed(f) for m in unbatch(message)]
    assert [m["requestId"] for m in back] == list(range(20))
    (alone,) = batch_frames(small[:1])
    assert FrameDecoder().feed(alone) == [{"type": "RUN", "requestId": 0}]  # no batch of one
