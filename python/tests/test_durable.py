"""Durable steps, children, waits and parents in Python handlers, against a
real coordinator: a flow submitted from Python run by Python and TypeScript
workers, a durable handler across ``kill -9`` of its worker, a step recorded
by one Python worker and replayed by another, the replay rules, and
``--queues``."""

from __future__ import annotations

import signal
from pathlib import Path

from support import Cluster, until

FIXTURES = Path(__file__).parent / "fixtures"
FLOWS = FIXTURES / "py_flows.py"
SLOW_RETRIES = (
    "--heartbeat-timeout-millis",
    "1500",
    "--retry-base-delay-millis",
    "3000",
    "--retry-max-delay-millis",
    "3000",
)
"""Retries wait 3 s: time enough to swap the workers between two attempts."""


def test_a_flow_from_python_runs_on_python_and_typescript_workers(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.py_worker(c, "py-flow", tasks=FLOWS, capacity=2)
    cluster.ts_worker(c, "ts-flow", tasks=FIXTURES / "ts_flows.mjs", capacity=2)
    with c.client() as client:
        refs = client.submit_flow(
            {
                "jobs": [
                    {
                        "ref": "sum",
                        "task_type": "py.sum_parents",
                        "payload": {},
                        "depends_on": ["from-ts", "from-py"],
                    },
                    {"ref": "from-ts", "task_type": "ts.tag", "payload": {"n": 1}},
                    {"ref": "from-py", "task_type": "py.tag", "payload": {"n": 2}},
                ]
            }
        )
        assert client.result(refs["sum"], timeout=30) == {
            "sum": 3,
            "by": ["python", "typescript"],
            "types": ["py.tag", "ts.tag"],
        }
        workers = {ref: client.attempts(job_id)[0]["workerId"] for ref, job_id in refs.items()}
        assert workers == {"sum": "py-flow", "from-ts": "ts-flow", "from-py": "py-flow"}


def test_a_durable_handler_survives_kill_9_of_its_worker(cluster: Cluster) -> None:
    c = cluster.coordinator()
    first_worker = cluster.py_worker(c, "py-doomed", tasks=FLOWS, capacity=2)
    with c.client() as client:
        job = client.submit(
            "py.workflow", {"n": 20, "hold_first_attempt": True, "sleep_ms": 50}, max_attempts=3
        )

        def first_step_recorded() -> bool:
            steps = client.status(job.job_id).get("steps") or []
            return [s["name"] for s in steps] == ["first"]

        until(first_step_recorded, 30, "the first step to be recorded")
        first_worker.signal(signal.SIGKILL)  # kill -9 of the worker, mid-handler
        cluster.py_worker(c, "py-survivor", tasks=FLOWS, capacity=2)
        result = job.result(timeout=60)
        # The first step ran once, in the killed worker's attempt: its value was replayed.
        assert result["first"]["attempt"] == 1
        assert (result["n"], result["child"], result["state"]) == (21, 42, "COMPLETED")
        done = client.status(job.job_id)
        assert [s["name"] for s in done.get("steps") or []] == [
            "first",
            "second",
            "dtp.sleep",
            "dtp.waitFor",
        ]
        attempts = client.attempts(job.job_id)
        assert attempts[0]["workerId"] == "py-doomed"
        assert {a["workerId"] for a in attempts[1:]} == {"py-survivor"}
        assert done.get("suspensions") == 2


def test_a_step_recorded_by_one_worker_is_replayed_by_another(cluster: Cluster) -> None:
    c = cluster.coordinator(*SLOW_RETRIES, fast=False)
    first = cluster.py_worker(
        c, "py-recorder", tasks=FLOWS, capacity=2, env={"DTP_TEST_WORKER": "recorder"}
    )
    with c.client() as client:
        job = client.submit("py.record_then_fail", {}, max_attempts=2)
        waiting = until(
            lambda: (s := client.status(job.job_id))["state"] == "RETRY_WAIT" and s,
            30,
            "the first attempt to fail",
        )
        assert [s["name"] for s in waiting.get("steps") or []] == ["made"]
        first.stop()
        cluster.py_worker(
            c, "py-replayer", tasks=FLOWS, capacity=2, env={"DTP_TEST_WORKER": "replayer"}
        )
        value = job.result(timeout=30)
        assert value["recorded"]["worker"] == "recorder"  # the step did not run again
        assert value["now"] == "replayer"
        assert [a["workerId"] for a in client.attempts(job.job_id)] == [
            "py-recorder",
            "py-replayer",
        ]


def test_a_replay_in_another_order_fails_the_job_for_good(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.py_worker(c, "py-order", tasks=FLOWS, capacity=2)
    with c.client() as client:
        job = client.submit("py.order", {}, max_attempts=5)
        done = job.wait(timeout=30)
        assert done["state"] == "FAILED"
        assert (done["error"] or "").startswith("NON_DETERMINISTIC: step 0 was recorded as")
        assert len(client.attempts(job.job_id)) == 2  # not retried past the replay


def test_a_worker_with_queues_takes_only_theirs(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.py_worker(c, "py-queues", "--queues", "emails,sms", tasks=FLOWS, capacity=2)
    c.proc.wait_for(r"worker registered workerId=py-queues")
    with c.client() as client:
        mine = client.submit("py.double", {"n": 1}, queue="sms")
        other = client.submit("py.double", {"n": 2})
        assert mine.result(timeout=30) == 2
        assert client.status(other.job_id)["state"] == "QUEUED"
    bad = cluster.py_worker(None, "py-bad-queue", "--queues", "no spaces", wait=False)
    assert bad.wait_exit() == 2
    assert "--queues must each match" in bad.output


def test_a_step_recorded_in_python_is_replayed_by_a_typescript_worker(cluster: Cluster) -> None:
    c = cluster.coordinator(*SLOW_RETRIES, fast=False)
    python = cluster.py_worker(c, "py-first", tasks=FLOWS, capacity=2)
    with c.client() as client:
        job = client.submit("x.cross", {"n": 7}, max_attempts=2)
        until(lambda: client.status(job.job_id)["state"] == "RETRY_WAIT", 30, "a retry")
        python.stop()
        cluster.ts_worker(c, "ts-second", tasks=FIXTURES / "ts_flows.mjs", capacity=2)
        assert job.result(timeout=30) == {"recorded": {"by": "python", "n": 7}, "now": "typescript"}


def test_a_step_recorded_in_typescript_is_replayed_by_a_python_worker(cluster: Cluster) -> None:
    c = cluster.coordinator(*SLOW_RETRIES, fast=False)
    typescript = cluster.ts_worker(c, "ts-first", tasks=FIXTURES / "ts_flows.mjs", capacity=2)
    with c.client() as client:
        job = client.submit("x.cross", {"n": 9}, max_attempts=2)
        until(lambda: client.status(job.job_id)["state"] == "RETRY_WAIT", 30, "a retry")
        typescript.stop()
        cluster.py_worker(c, "py-second", tasks=FLOWS, capacity=2)
        assert job.result(timeout=30) == {"recorded": {"by": "typescript", "n": 9}, "now": "python"}


def test_a_sleeping_job_is_scheduled_and_a_waiting_one_waits(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.py_worker(c, "py-sleeper", tasks=FLOWS, capacity=2)
    with c.client() as client:
        sleeping = client.submit("py.sleeper", {"duration": "2s"}, max_attempts=1)
        scheduled = until(
            lambda: (s := client.status(sleeping.job_id))["state"] == "SCHEDULED" and s,
            20,
            "the sleep",
        )
        assert (scheduled["runAtMillis"] or 0) >= scheduled["createdAtMillis"] + 2000
        client.queues.pause("later", create=True)
        other = client.submit("py.double", {"n": 5}, queue="later")
        waiting = client.submit("py.waiter", {"other": other.job_id}, max_attempts=1)
        until(lambda: client.status(waiting.job_id)["state"] == "WAITING", 20, "the wait")
        client.queues.resume("later")
        assert waiting.result(timeout=30) == {
            "jobId": other.job_id,
            "state": "COMPLETED",
            "result": 10,
            "error": None,
            "omitted": False,
        }
        assert sleeping.result(timeout=30) == "woke"  # max_attempts 1: sleeps use none
        assert client.status(sleeping.job_id)["suspensions"] == 1


def test_an_isolated_async_handler_has_the_same_steps(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.py_worker(c, "py-isolated", tasks=FLOWS, capacity=2)
    with c.client() as client:
        job = client.submit("py.isolated_workflow", {"n": 3}, max_attempts=1)
        value = job.result(timeout=30)
        assert (value["first"]["attempt"], value["child"], value["parents"]) == (1, 6, 0)
        done = client.status(job.job_id)
        assert [s["name"] for s in done.get("steps") or []] == ["first", "dtp.sleep", "dtp.waitFor"]
        assert done.get("children") and len(done.get("children") or []) == 1
