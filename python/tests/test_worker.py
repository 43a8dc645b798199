"""The Python worker against a real coordinator: results, failures, preemption,
drain, bad task modules, refusals, crashes and freezes."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path
from typing import Any, cast

import pytest

import dtp
from support import Cluster, alive, cpu_seconds, until

TASKS = Path(__file__).parent / "fixtures" / "py_tasks.py"


def submit_and_wait(
    client: dtp.Client, task: str, payload: dict[str, Any], **options: Any
) -> dict[str, Any]:
    # As a plain dict: these tests read fields they know are there.
    return cast("dict[str, Any]", client.submit(task, payload, **options).wait(timeout=30))


def test_results_failures_and_logs(cluster: Cluster) -> None:
    c = cluster.coordinator()
    worker = cluster.py_worker(c, "py-results", tasks=TASKS, capacity=2)
    with c.client() as client:
        job = client.submit("py.upper", {"text": "hello"})
        assert job.result(timeout=30) == "HELLO"
        snapshot = job.status()
        assert snapshot["resultFormat"] == "text"
        assert snapshot["attempts"] == 1

        value = {"a": [1, 2.5, None, True, "x"], "nested": {"ü": "ß"}}
        assert client.submit("py.value", {"value": value}).result(timeout=30) == value
        done = submit_and_wait(client, "py.value", {})
        assert (done["result"], done["resultFormat"]) == ("null", "json")

        ctx = client.submit("py.context", {}, max_attempts=4, timeout_millis=60_000)
        seen = ctx.result(timeout=30)
        assert seen["job_id"] == ctx.job_id
        assert seen["attempt_number"] == 1 and seen["max_attempts"] == 4
        assert seen["task_type"] == "py.context"
        assert 0 < seen["deadline_at_ms"] - seen["now_ms"] <= 60_000

        failed = submit_and_wait(client, "py.nonretryable", {}, max_attempts=3)
        assert (failed["state"], failed["attempts"], failed["error"]) == ("FAILED", 1, "not today")
        with pytest.raises(dtp.JobFailedError) as raised:
            client.result(failed["jobId"], timeout=5)
        assert raised.value.job_error == "not today"

        flaky = submit_and_wait(client, "py.flaky", {})
        assert (flaky["state"], flaky["attempts"], flaky["result"]) == ("COMPLETED", 2, "2")
        assert flaky["error"] == "ValueError: flaky on attempt 1"

        invalid = submit_and_wait(client, "py.checked", {"name": 5}, max_attempts=3)
        assert (invalid["state"], invalid["attempts"]) == ("FAILED", 1)
        assert invalid["error"] == "Invalid payload: name must be a string"
        assert client.submit("py.checked", {"name": " ada "}).result(timeout=30) == "hello ada"

        assert client.submit("py.async", {}).result(timeout=30) == {"async": True, "attempt": 1}

        big = submit_and_wait(client, "py.big", {"n": 600_000}, max_attempts=1)
        assert big["error"].startswith("result too large (600000 bytes; limit 524288)")
        assert client.submit("py.big", {"n": 1000}).result(timeout=30) == "x" * 1000

        not_json = submit_and_wait(client, "py.tuple", {}, max_attempts=1)
        assert not_json["error"].startswith(
            "ResultNotJsonError: the handler's result is not a JSON value: "
            "result.pair is a tuple (convert it to a list)"
        )

        crashed = submit_and_wait(client, "py.exit", {}, max_attempts=1)
        assert crashed["error"].startswith("the task process exited with code 3 unexpectedly")

        assert client.submit("SHA256", {"text": "abc"}).result(timeout=30) == (
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        )
        assert client.submit("PRIME_COUNT", {"limit": 100}).result(timeout=30) == "25"
        assert client.submit("WORD_COUNT", {"text": "one  two\tthree\nfour"}).result(30) == "4"
        assert client.submit("FAIL", {"failUntilAttempt": 2}).result(30) == "succeeded on attempt 2"
    out = worker.output
    assert re.search(
        rf"INFO dtp.task.py.upper: upper of hello job_id={job.job_id} attempt_id=", out
    )
    assert re.search(rf"WARNING user.code: a plain logger, tagged too job_id={job.job_id} ", out)
    started = out.index(f"task started jobId={job.job_id}")
    assert started < out.index("upper of hello"), "the handler's line comes after 'task started'"


def started_pid(worker_log: str, job_id: str) -> int:
    match = re.search(rf"task started jobId={job_id} .*pid=(\d+)", worker_log)
    assert match, f"no 'task started' line for {job_id}"
    return int(match.group(1))


def test_cancel_kills_a_busy_handler_within_the_grace(cluster: Cluster) -> None:
    grace_ms = 400
    c = cluster.coordinator()
    worker = cluster.py_worker(
        c, "py-cancel", "--cancel-grace-millis", str(grace_ms), tasks=TASKS, capacity=1
    )
    with c.client() as client:
        job = client.submit("py.busy", {})
        pid = started_pid(
            worker.wait_for(rf"task started jobId={job.job_id} .*").group(0), job.job_id
        )
        first = cpu_seconds(pid)
        assert first is not None
        until(lambda: (cpu_seconds(pid) or 0) > first + 0.05, 10, "the busy handler to burn CPU")
        cancelled_at = time.monotonic()
        assert client.cancel(job.job_id)["cancelled"] is True
        until(lambda: not alive(pid), 10, "the busy handler's process to end")
        stopped_after = time.monotonic() - cancelled_at
        line = worker.wait_for(rf"task stopped: its process was killed jobId={job.job_id} .*")
        stop_ms = int(re.search(r"stopMs=(\d+)", line.group(0)).group(1))  # type: ignore[union-attr]
        # The process is killed when the grace runs out, not before, and soon after.
        assert grace_ms <= stop_ms < grace_ms + 2500, line.group(0)
        assert stopped_after < (grace_ms + 4000) / 1000
        with pytest.raises(dtp.JobCancelledError):
            job.result(timeout=10)
        # A fresh process takes the slot: the next attempt runs.
        assert client.submit("py.upper", {"text": "next"}).result(timeout=30) == "NEXT"

        # A handler that honours ctx.cancelled keeps its process.
        coop = client.submit("py.cooperative", {})
        coop_pid = started_pid(
            worker.wait_for(rf"task started jobId={coop.job_id} .*").group(0), coop.job_id
        )
        client.cancel(coop.job_id)
        worker.wait_for(rf"task stopped: the handler stopped jobId={coop.job_id} ")
        worker.wait_for(rf"stopping: cancel job_id={coop.job_id}")
        assert client.submit("py.pid", {}).result(timeout=30) == coop_pid

        # An async handler is cancelled the asyncio way and stops at its await.
        waiting = client.submit("py.async_wait", {})
        worker.wait_for(rf"task started jobId={waiting.job_id} ")
        client.cancel(waiting.job_id)
        worker.wait_for(rf"task stopped: the handler stopped jobId={waiting.job_id} ")
        worker.wait_for(rf"async handler cancelled \(cancel\) job_id={waiting.job_id}")


def test_deadline_stops_the_handler(cluster: Cluster) -> None:
    c = cluster.coordinator()
    worker = cluster.py_worker(c, "py-deadline", "--cancel-grace-millis", "200", tasks=TASKS)
    with c.client() as client:
        job = client.submit("py.busy", {}, timeout_millis=1500, max_attempts=1)
        done = job.wait(timeout=30)
        assert done["state"] == "FAILED", done
        pid = started_pid(worker.output, job.job_id)
        # The worker's own deadline (from receipt) and the coordinator's revoke
        # (from assignment, at its next sweep) fall within a few ms of each
        # other: either may stop the handler first, as for the second job below.
        worker.wait_for(
            rf"(deadline passed: stopping the task|cancel received) jobId={job.job_id} "
        )
        worker.wait_for(
            rf"task stopped: its process was killed jobId={job.job_id} .*reason=(deadline|cancel)"
        )
        until(lambda: not alive(pid), 10, "the process to be gone")
        # The handler held a CPU for longer than the heartbeat timeout (1.5 s):
        # heartbeats went on all the same.
        assert "worker lost" not in c.proc.output
        coop = client.submit("py.cooperative", {}, timeout_millis=1500, max_attempts=1)
        coop.wait(timeout=30)
        # The coordinator revokes the lease at the same deadline (counted from assignment,
        # a little earlier): whichever comes first stops the handler.
        worker.wait_for(rf"stopping: (deadline|cancel) job_id={coop.job_id}")


def test_sigterm_drains_and_exits_0(cluster: Cluster) -> None:
    c = cluster.coordinator()
    worker = cluster.py_worker(c, "py-drain", tasks=TASKS, capacity=1)
    with c.client() as client:
        job = client.submit("py.sleep", {"seconds": 1.0})
        worker.wait_for(rf"task started jobId={job.job_id} ")
        worker.signal(signal.SIGTERM)
        c.proc.wait_for(r"worker draining workerId=py-drain")
        later = client.submit("py.upper", {"text": "after"})
        assert worker.wait_exit(20) == 0
        done = job.wait(timeout=10)
        assert (done["state"], done["attempts"]) == ("COMPLETED", 1), done
        assert later.status()["state"] == "QUEUED"  # never given to the draining worker
    assert "drained: every task finished" in worker.output


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        (
            "raise RuntimeError('no database')\n",
            r"cannot be loaded: RuntimeError: no database \(at .*bad\.py line 1\)",
        ),
        ("import dtp\nX = 1\n", r"declares no task"),
        (
            "import dtp\n@dtp.task('a.b')\ndef f(p, c): pass\n@dtp.task('a.b')\ndef g(p, c): pass\n",
            r"declares task 'a.b' twice",
        ),
        ("import dtp\n@dtp.task('Sha256')\ndef f(p, c): pass\n", r"task name 'Sha256' is reserved"),
        (
            "import dtp\n@dtp.task('9lives')\ndef f(p, c): pass\n",
            r"task name '9lives' does not match",
        ),
        ("import dtp\n@dtp.task('x', schema=3)\ndef f(p, c): pass\n", r"schema must be a callable"),
    ],
)
def test_a_bad_task_module_exits_2_naming_it(cluster: Cluster, source: str, problem: str) -> None:
    bad = cluster.write("bad.py", source)
    worker = cluster.py_worker(None, "py-bad", tasks=bad)
    assert worker.wait_exit() == 2
    assert re.search(
        rf"python -m dtp.worker: task module {re.escape(str(bad))}: {problem}", worker.output
    ), worker.output


def test_modules_by_name_and_across_files(cluster: Cluster) -> None:
    cluster.write("mod_one.py", "import dtp\n@dtp.task('same')\ndef f(p, c): return 1\n")
    cluster.write("mod_two.py", "import dtp\n@dtp.task('same')\ndef g(p, c): return 2\n")
    twice = cluster.py_worker(None, "py-twice", "--tasks", "mod_two", tasks="mod_one")
    assert twice.wait_exit() == 2
    assert "task module mod_two: task 'same' is already declared by task module mod_one" in (
        twice.output
    )
    missing = cluster.py_worker(None, "py-missing", tasks="no_such_module")
    assert missing.wait_exit() == 2
    assert "task module no_such_module: cannot be found: no module named 'no_such_module'" in (
        missing.output
    )
    no_file = cluster.py_worker(None, "py-nofile", tasks="nowhere/tasks.py")
    assert no_file.wait_exit() == 2
    assert "task module nowhere/tasks.py: cannot be found: no such file" in no_file.output
    c = cluster.coordinator()
    cluster.py_worker(c, "py-by-name", tasks="mod_one")
    with c.client() as client:
        assert client.submit("same", {}).result(timeout=30) == 1


def test_tokens_refused_exit_1_and_accepted(cluster: Cluster) -> None:
    tokens = cluster.write("worker.tokens", "# worker tokens\nold-token\nnew-token\n")
    c = cluster.coordinator("--worker-token-file", str(tokens))
    wrong = cluster.write("wrong.token", "not-a-token\n")
    refused = cluster.py_worker(c, "py-wrong", "--token-file", str(wrong), wait=False)
    assert refused.wait_exit() == 1
    assert re.search(
        r"refused by the coordinator \(UNAUTHENTICATED\): Unauthenticated", refused.output
    )
    assert "not-a-token" not in refused.output and "not-a-token" not in c.proc.output
    cluster.py_worker(c, "py-env-token", tasks=TASKS, env={"DTP_TOKEN": "new-token"})
    right = cluster.write("right.token", "old-token\n")
    cluster.py_worker(c, "py-file-token", "--token-file", str(right), tasks=TASKS)


def test_kill_9_mid_job_completes_on_attempt_2(cluster: Cluster) -> None:
    c = cluster.coordinator()
    first = cluster.py_worker(c, "py-a", tasks=TASKS)
    with c.client() as client:
        job = client.submit("py.sleep", {"seconds": 0.8})
        line = first.wait_for(rf"task started jobId={job.job_id} .*")
        child = started_pid(line.group(0), job.job_id)
        first.signal(signal.SIGKILL)
        cluster.py_worker(c, "py-b", tasks=TASKS)
        done = job.wait(timeout=30)
        assert (done["state"], done["attempts"]) == ("COMPLETED", 2), done
        attempts = client.attempts(job.job_id)
        assert [a["workerId"] for a in attempts] == ["py-a", "py-b"]
        assert attempts[0]["outcome"] == "WORKER_LOST"
        # The killed worker's task process saw its pipe close and left at once.
        until(lambda: not alive(child), 10, "the orphaned task process to exit")


def test_frozen_worker_is_lost_and_its_late_result_rejected(cluster: Cluster) -> None:
    c = cluster.coordinator()
    frozen = cluster.py_worker(c, "py-frozen", tasks=TASKS)
    with c.client() as client:
        job = client.submit("py.sleep", {"seconds": 0.5})
        frozen.wait_for(rf"task started jobId={job.job_id} ")
        frozen.signal(signal.SIGSTOP)
        c.proc.wait_for(r"worker lost workerId=py-frozen .*heartbeat", 20)
        cluster.py_worker(c, "py-rescuer", tasks=TASKS)
        done = job.wait(timeout=30)
        assert (done["state"], done["attempts"]) == ("COMPLETED", 2), done
        mark = len(frozen.output)
        frozen.signal(signal.SIGCONT)
        c.proc.wait_for(rf"stale result rejected jobId={job.job_id} .*workerId=py-frozen", 20)
        after = client.status(job.job_id)
        assert (after["state"], after["attempts"], after["result"]) == (
            done["state"],
            2,
            done["result"],
        )
        frozen.wait_for(r"registered coordinator=", 20, after=mark)


def test_reconnects_after_the_coordinator_restarts(cluster: Cluster, tmp_path: Path) -> None:
    db = str(tmp_path / "jobs.db")
    c = cluster.coordinator("--database", db)
    worker = cluster.py_worker(c, "py-reconnect", tasks=TASKS)
    with c.client() as client:
        assert client.submit("py.upper", {"text": "first"}).result(timeout=30) == "FIRST"
        c.proc.signal(signal.SIGKILL)
        c.proc.wait_exit()
        worker.wait_for(r"connection lost")
        again = cluster.coordinator("--database", db, ports=(c.worker_port, c.client_port))
        again.wait_registered("py-reconnect")
        # The client's connection died with the coordinator; it sees that before it
        # sends, so even a submission without an idempotency key goes out afresh.
        assert client.submit("py.upper", {"text": "back"}).result(timeout=30) == "BACK"


def test_a_silent_coordinator_is_dropped(cluster: Cluster) -> None:
    c = cluster.coordinator()
    worker = cluster.py_worker(c, "py-watchdog", "--coordinator-timeout-millis", "600", tasks=TASKS)
    assert "heartbeatAck" in worker.wait_for(r"registered .*features=(\S+)").group(1)
    c.proc.signal(signal.SIGSTOP)
    try:
        line = worker.wait_for(r"coordinator silent: dropping the connection silentMs=(\d+)", 20)
        assert int(line.group(1)) >= 600
    finally:
        c.proc.signal(signal.SIGCONT)
    mark = len(worker.output)
    worker.wait_for(r"registered coordinator=", 30, after=mark)


def test_a_worker_whose_id_is_taken_over_exits_1(cluster: Cluster) -> None:
    c = cluster.coordinator()
    first = cluster.py_worker(c, "py-same-id", tasks=TASKS)
    mark = len(c.proc.output)
    cluster.py_worker(c, "py-same-id", tasks=TASKS, wait=False)
    c.wait_registered("py-same-id", after=mark)
    assert first.wait_exit() == 1
    assert "refused by the coordinator (WORKER_REPLACED)" in first.output
