"""The pool of task processes (``process.py``, ``_child.py``): where each
attempt runs.

- Up to ``capacity`` attempts hold a slot at once, shared and isolated
  together; up to ``queue_limit`` more wait for a free slot.
- Shared attempts (``async def`` handlers, the short built-ins) run on
  ``processes`` shared task processes, many each, started with the pool and
  replaced when one ends. A new one goes to the least loaded process that
  answered within ``ANSWER_WINDOW_S``, and only when none did, to the least
  loaded of all: a process whose loop a handler blocks is passed over, and
  logged (with the job ids on it) until it answers again.
- An isolated attempt (``def`` handlers, ``isolate=True``, ``PRIME_COUNT``)
  has an isolated task process to itself while it runs. Those are reused; as
  many as ``processes`` (at most ``capacity``) are started with the pool when
  the task modules declare isolated tasks and kept, more are started when
  needed and ended after ``ISOLATED_LINGER_S`` without work.
- ``stop(task, reason)`` preempts an attempt: it settles as cancelled at once
  (its slot is free and nothing it produces is ever reported), its process
  is told (``ctx.cancelled``), and it gets ``cancel_grace`` seconds to settle.
  One that does not has its process ended (its process group killed) and
  replaced; the other attempts of a shared process are requeued
  (``Outcome.requeue``).
- A process that dies (``os._exit``, a crash, the OOM killer) fails its
  isolated attempt with a message saying so, or requeues its shared ones; a
  fresh one takes its place.
- Each task process leads a process group of its own, and whatever its
  handlers start stays in it. Killing a task process kills its group, so
  nothing a handler started outlives a cancel, a deadline or the pool. An
  isolated attempt that ends with processes of its own still running retires
  its process at once; a shared process does when it next runs no attempt.
  When the worker itself dies, each task process ends its group as its pipe
  closes.

At most ``processes`` shared processes, plus one per shared process being
retired, plus one isolated process per isolated attempt holding a slot (or
``processes`` of them, whichever is more), plus one per attempt stopped
within the last grace, exist at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from collections import deque
from collections.abc import Coroutine
from typing import Any

from ..builtin_tasks import ISOLATED_BUILTINS
from ..framing import FrameTooLargeError, Message
from .pipe import ALIVE_INTERVAL_S, ANSWER_WINDOW_S, encode_message
from .pool_task import LogSink, Outcome, PoolTask, TaskHandle
from .process import PipeReader, TaskProcess

log = logging.getLogger("dtp.worker")

MAX_PROCESSES = 256
ISOLATED_LINGER_S = 5.0
"""How long an isolated task process beyond the ones kept stays without work."""
_CHECK_INTERVAL_S = 2 * ALIVE_INTERVAL_S
_JOB_IDS_LOGGED = 10


def default_processes() -> int:
    """The CPU count, within 1..MAX_PROCESSES."""
    return max(1, min(MAX_PROCESSES, os.cpu_count() or 1))


def encode_attempt(run: Message) -> tuple[bytes, str | None]:
    """The RUN message of an attempt, encoded, or why its payload cannot reach a
    task process.

    The pipe carries what JSON text cannot (an infinity, which is what a
    number like ``1e400`` decodes to), so the handler gets the payload as it
    was decoded; nesting beyond ``DEEP_JSON_LEVELS`` or a message over the
    pipe's frame fails the attempt, never the worker.
    """
    try:
        return encode_message({**run, "type": "RUN"}), None
    except (FrameTooLargeError, ValueError, TypeError) as err:
        return b"", f"the payload cannot be passed to a task process: {err}"


class TaskPool:
    def __init__(
        self,
        capacity: int,
        modules: list[str],
        cancel_grace: float,
        queue_limit: int,
        log_level: int = logging.INFO,
        processes: int | None = None,
    ) -> None:
        self.capacity = capacity
        self.cancel_grace = cancel_grace
        self.queue_limit = queue_limit
        self.shared_count = min(capacity, processes or default_processes())
        self.isolated_kept = 0
        """Isolated processes kept without work (set when the modules are known)."""
        self._init: Message = {
            "type": "INIT",
            "modules": list(modules),
            "sysPath": list(sys.path),
            "logLevel": log_level,
        }
        self._isolated_types: frozenset[str] = ISOLATED_BUILTINS
        self._processes: list[TaskProcess] = []
        self._admitted: dict[int, PoolTask] = {}
        self._queued: deque[PoolTask] = deque()
        self._waiting: deque[PoolTask] = deque()
        """Attempts holding a slot and waiting for a process to start."""
        self._spawn_failed_at = 0.0
        self._next_request = 1
        self._closing = False
        self._check: asyncio.TimerHandle | None = None
        self._checked_at = 0.0
        self._tasks: set[asyncio.Future[None]] = set()

    # ------------------------------------------------------------ looking in

    @property
    def process_count(self) -> int:
        return len(self._processes)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._processes]

    def role_pids(self, role: str) -> list[int]:
        return [p.pid for p in self._processes if p.role == role and p.live]

    @property
    def blocked_pids(self) -> list[int]:
        return [p.pid for p in self._processes if p.blocked_since is not None]

    def is_isolated(self, task_type: str) -> bool:
        return task_type in self._isolated_types

    # ------------------------------------------------------------- starting

    async def start(self) -> Message:
        """Starts the processes; returns what the first one said of the modules
        (``LOADED`` with ``taskTypes``, or ``LOAD_FAILED`` / ``EXITED`` with ``problem``)."""
        answer = await self._spawn("shared").loaded
        if answer.get("type") != "LOADED":
            return answer
        isolated = [str(name) for name in answer.get("isolated") or []]
        self._isolated_types = ISOLATED_BUILTINS | frozenset(isolated)
        self.isolated_kept = min(self.capacity, self.shared_count) if isolated else 0
        others = [self._spawn("shared") for _ in range(self.shared_count - 1)]
        others += [self._spawn("isolated") for _ in range(self.isolated_kept)]
        # Ready together, so that the first attempts spread over all of them.
        await asyncio.gather(*(p.loaded for p in others))
        self._checked_at = time.monotonic()
        self._check = asyncio.get_running_loop().call_later(_CHECK_INTERVAL_S, self._on_check)
        return answer

    def run(self, run: Message, on_log: LogSink) -> TaskHandle:
        """Starts an attempt, or queues it (up to ``queue_limit``)."""
        request_id = self._next_request
        self._next_request += 1
        body, problem = encode_attempt({**run, "requestId": request_id})
        task_type = str(run.get("taskType"))
        task = PoolTask(
            request_id, body, on_log, str(run.get("jobId")), self.is_isolated(task_type)
        )
        handle = TaskHandle(task, self)
        if problem is not None:
            task.settle(Outcome(success=False, error=problem, retryable=False))
        elif self._closing:
            task.settle(Outcome(success=False, error="task pool is closed"))
        elif len(self._admitted) < self.capacity:
            self._admit(task)
        elif len(self._queued) < self.queue_limit:
            self._queued.append(task)
        else:
            task.settle(Outcome(success=False, error=f"task pool at capacity ({self.capacity})"))
        return handle

    def _admit(self, task: PoolTask) -> None:
        self._admitted[task.request_id] = task

        def settled() -> None:
            self._admitted.pop(task.request_id, None)
            self._admit_queued()

        task.on_settled = settled
        self._place(task)

    def _admit_queued(self) -> None:
        while not self._closing and self._queued and len(self._admitted) < self.capacity:
            self._admit(self._queued.popleft())

    def _place(self, task: PoolTask) -> None:
        process = self._pick_isolated() if task.isolated else self._pick_shared()
        if process is None:
            self._waiting.append(task)
            self._ensure_processes()
        else:
            process.run(task)

    def _pick_shared(self) -> TaskProcess | None:
        ready = [p for p in self._processes if p.shared and p.available]
        now = time.monotonic()
        answering = [p for p in ready if p.answers(now)]
        candidates = answering or ready
        return min(candidates, key=lambda p: p.load) if candidates else None

    def _pick_isolated(self) -> TaskProcess | None:
        return next((p for p in self._processes if not p.shared and p.available), None)

    def _place_waiting(self) -> None:
        for task in list(self._waiting):
            process = self._pick_isolated() if task.isolated else self._pick_shared()
            if process is not None:
                self._waiting.remove(task)
                process.run(task)

    # ------------------------------------------------------------- stopping

    def _stop(self, task: PoolTask, reason: str) -> asyncio.Future[str]:
        done: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        process = task.process
        placed = process is not None and task.request_id in process.attempts
        if task in self._queued:
            self._queued.remove(task)
        if task in self._waiting:
            self._waiting.remove(task)
        task.settle(Outcome(success=False, error=f"task stopped ({reason})", cancelled=True))
        if process is None or not placed:
            done.set_result("cooperative")
            return done
        return process.stop(task, reason, self.cancel_grace)

    # ------------------------------------------------------------ processes

    def _ensure_processes(self) -> None:
        """Starts the processes the pool lacks: shared ones up to their count,
        isolated ones for the isolated attempts waiting (and the ones kept)."""
        if self._closing:
            return
        shared = sum(1 for p in self._processes if p.shared and p.state in ("starting", "ready"))
        isolated = [p for p in self._processes if not p.shared and p.live]
        free = sum(1 for p in isolated if p.state == "starting" or p.available)
        waiting = sum(1 for t in self._waiting if t.isolated)
        wanted = {
            "shared": self.shared_count - shared,
            "isolated": max(waiting - free, self.isolated_kept - len(isolated)),
        }
        try:
            for role, count in wanted.items():
                for _ in range(count):
                    self._spawn(role)
        except OSError as err:
            # No process could be started (fork refused, no memory): the
            # attempts waiting for one wait on; the next check tries again.
            self._spawn_failed_at = time.monotonic()
            log.error("could not start a task process", extra={"fields": {"error": str(err)}})

    def _freed(self, process: TaskProcess) -> None:
        """An attempt of ``process`` ended (or settled its stop)."""
        if process.load:
            return
        process.idle_since = time.monotonic()
        if self._closing or process.state == "retiring":
            process.kill()
        elif not process.shared:
            self._place_waiting()

    def _retire(self, process: TaskProcess, why: str) -> None:
        if process.state != "ready":
            return
        log.info(
            f"retiring a task process: {why}",
            extra={"fields": {"pid": process.pid, "attempts": len(process.attempts)}},
        )
        process.state = "retiring"
        self._ensure_processes()
        self._freed(process)

    def _on_exit(self, process: TaskProcess) -> None:
        if process in self._processes:
            self._processes.remove(process)
        if not self._closing:
            self._ensure_processes()
            self._place_waiting()

    def _on_check(self) -> None:
        """Every other liveness beat: blocked shared processes, lingering isolated ones."""
        now = time.monotonic()
        late = now - self._checked_at - _CHECK_INTERVAL_S > ANSWER_WINDOW_S
        self._checked_at = now
        if self._waiting and now - self._spawn_failed_at > 1:
            self._ensure_processes()
        for process in list(self._processes):
            if process.state != "ready":
                continue
            if process.shared and not late:
                self._check_answers(process, now)
            elif not process.shared and not process.load:
                self._end_if_lingering(process, now)
        self._check = asyncio.get_running_loop().call_later(_CHECK_INTERVAL_S, self._on_check)

    def _check_answers(self, process: TaskProcess, now: float) -> None:
        if process.blocked_since is not None or process.answers(now) or not process.load:
            return  # (this worker's own loop was late: it says nothing of the processes)
        process.blocked_since = process.last_heard
        jobs = [t.job_id for t in process.attempts.values()]
        jobs += [s.task.job_id for s in process.stopping.values()]
        shown = ",".join(jobs[:_JOB_IDS_LOGGED]) + (",..." if len(jobs) > _JOB_IDS_LOGGED else "")
        log.warning(
            "task process not answering (a handler blocks its event loop?): "
            "new attempts go to the others",
            extra={
                "fields": {
                    "pid": process.pid,
                    "silentMs": round((now - process.last_heard) * 1000),
                    "attempts": process.load,
                    "jobIds": shown,
                }
            },
        )

    def _end_if_lingering(self, process: TaskProcess, now: float) -> None:
        if now - process.idle_since < ISOLATED_LINGER_S:
            return
        idle = [p for p in self._processes if not p.shared and p.available]
        if len(idle) > self.isolated_kept:
            process.kill()

    def _background(self, job: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(job)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _spawn(self, role: str) -> TaskProcess:
        """Starts a task process; it is ``starting`` until its pipes are set up."""
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        env = dict(os.environ)
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join(
            [package_root, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        )
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "dtp.worker._child", str(to_child_r), str(from_child_w)],
                pass_fds=(to_child_r, from_child_w),
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # a process group of its own, for what it starts
            )
        except OSError:
            os.close(to_child_w)
            os.close(from_child_r)
            raise
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        process = TaskProcess(self, proc, role)
        self._processes.append(process)
        self._background(self._connect(process, to_child_w, from_child_r))
        return process

    async def _connect(self, process: TaskProcess, to_child_w: int, from_child_r: int) -> None:
        loop = asyncio.get_running_loop()
        writer, _ = await loop.connect_write_pipe(
            asyncio.Protocol, os.fdopen(to_child_w, "wb", buffering=0)
        )
        process.attach_writer(writer)
        process.send_now({**self._init, "role": process.role})  # before any attempt
        reader, _ = await loop.connect_read_pipe(
            lambda: PipeReader(process), os.fdopen(from_child_r, "rb", buffering=0)
        )
        process.attach_reader(reader)
        if process.state == "starting":
            process.state = "ready"
            process.last_heard = time.monotonic()
            self._place_waiting()

    async def close(self) -> None:
        """Cancels every attempt and kills every process. Idempotent."""
        self._closing = True
        if self._check is not None:
            self._check.cancel()
        closed = Outcome(success=False, error="task pool closed", cancelled=True)
        for task in [*self._queued, *self._admitted.values()]:
            task.settle(closed)
        self._queued.clear()
        self._waiting.clear()
        for process in list(self._processes):
            process.kill()
        waits = [p.exited for p in self._processes]
        if waits:
            await asyncio.wait(waits, timeout=5)
