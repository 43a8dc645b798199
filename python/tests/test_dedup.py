"""Deduplication keys, expiry and rate-limited handlers: what the client sends
and reads (a fake client port), what the worker reports when a handler raises
``dtp.RateLimited`` with and without the coordinator's ``rateLimits`` (a fake
coordinator), and both against a real coordinator."""

from __future__ import annotations

import asyncio
import copy
import datetime
import pickle
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

import dtp
from dtp.framing import Message
from dtp.worker._child import failure
from dtp.worker.attempt import result_message
from dtp.worker.pool_task import Outcome
from dtp.worker.process import _outcome
from fakes import FakeConn, FakeServer
from support import HOST, Cluster, Coordinator, until

TASKS = Path(__file__).parent / "fixtures" / "py_tasks.py"
DAY_MS = 86_400_000


# ------------------------------------------------------------ the client


class ClientPort:
    """A client port that records every request and answers each with ``answer``
    (by default: created, with a snapshot; probes are understood)."""

    def __init__(self, answer: Callable[[Message], Message | None] | None = None) -> None:
        self.requests: list[Message] = []
        self._answer = answer or (lambda message: None)
        self._lock = threading.Lock()
        self.server = FakeServer(self._serve)

    @property
    def address(self) -> str:
        return f"{HOST}:{self.server.port}"

    def of(self, kind: str) -> list[Message]:
        with self._lock:
            return [m for m in self.requests if m["type"] == kind and m.get("jobs") != []]

    def _serve(self, conn: FakeConn) -> None:
        while True:
            message = conn.recv(timeout=30, skip=())
            if message is None:
                return
            with self._lock:
                self.requests.append(message)
            conn.send(self._answer(message) or default_answer(message))


def snapshot(job_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "jobId": job_id,
        "taskType": "SHA256",
        "state": "QUEUED",
        "attempts": 0,
        "maxAttempts": 3,
        "workerId": None,
        "result": None,
        "error": None,
        "createdAtMillis": 1,
        "updatedAtMillis": 1,
        "priority": "NORMAL",
        **fields,
    }


def default_answer(message: Message) -> Message:
    kind = message["type"]
    if kind == "SUBMIT_JOB":
        return {"type": "JOB_SUBMITTED", "jobId": "j-1", "job": snapshot("j-1")}
    if kind == "SUBMIT_JOBS":
        return {"type": "JOBS_SUBMITTED", "jobIds": [f"j-{n}" for n in range(len(message["jobs"]))]}
    if kind == "SUBMIT_FLOW":
        if not message["jobs"]:  # the probe: understood
            return {"type": "ERROR", "code": "INVALID_FLOW", "message": "a flow has 1..10000 jobs"}
        jobs = [{"ref": j["ref"], "jobId": f"j-{j['ref']}"} for j in message["jobs"]]
        return {"type": "FLOW_SUBMITTED", "jobs": jobs}
    # Any other request (a probe of a feature): an answer that says it was understood.
    return {"type": "ERROR", "code": "INTERNAL", "message": f"{kind} is not served here"}


@pytest.fixture
def port() -> Any:
    p = ClientPort()
    try:
        yield p
    finally:
        p.server.stop()


DEDUP_FIELDS = ("dedupKey", "dedupMode", "dedupWindowMillis", "expiresAtMillis")


def test_submit_sends_the_dedup_and_expiry_fields_only_when_given(port: ClientPort) -> None:
    expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    with dtp.Client(port.address) as client:
        plain = client.submit("SHA256", {"text": "a"})
        client.submit(
            "SHA256",
            {"text": "b"},
            dedup_key="k-1",
            dedup_mode="throttle",
            dedup_window_ms=60_000,
            expires_at=expires,
        )
        before = int(time.time() * 1000)
        client.submit("SHA256", {}, dedup_key="k-2", dedup_mode="debounce", delay_ms=500)
        client.submit("SHA256", {}, dedup_key="k-3", expire_after_ms=30_000)
        client.submit("SHA256", {}, expires_at=int(time.time() * 1000) + 5000)
        after = int(time.time() * 1000)
        client.submit("SHA256", {}, expires_at_ms=after + 7000)
    assert (plain.deduplicated, plain.replaced) == (False, False)
    none, throttle, debounce, active, expiry, exact = port.of("SUBMIT_JOB")
    assert not set(DEDUP_FIELDS) & set(none)
    assert {f: throttle[f] for f in DEDUP_FIELDS} == {
        "dedupKey": "k-1",
        "dedupMode": "throttle",
        "dedupWindowMillis": 60_000,
        "expiresAtMillis": int(expires.timestamp() * 1000),
    }
    assert (debounce["dedupKey"], debounce["dedupMode"]) == ("k-2", "debounce")
    assert before + 500 <= debounce["runAtMillis"] <= after + 500
    assert "dedupWindowMillis" not in debounce and "expiresAtMillis" not in debounce
    assert active["dedupKey"] == "k-3" and "dedupMode" not in active  # active: the default
    assert before + 30_000 <= active["expiresAtMillis"] <= after + 30_000
    assert "dedupKey" not in expiry and expiry["expiresAtMillis"] > before
    assert exact["expiresAtMillis"] == after + 7000


def test_the_result_says_deduplicated_and_replaced() -> None:
    def answer(message: Message) -> Message | None:
        if message["type"] == "SUBMIT_JOBS":
            # A key used twice: the second names the first's job, debounced.
            return {
                "type": "JOBS_SUBMITTED",
                "jobIds": ["a", "a", "c"],
                "deduplicated": [False, True, False],
                "replaced": [False, True],  # shorter: the rest are false
            }
        if message["type"] != "SUBMIT_JOB" or "dedupKey" not in message:
            return None
        debounced = message.get("dedupMode") == "debounce"
        reply: Message = {
            "type": "JOB_SUBMITTED",
            "jobId": "held",
            "job": snapshot("held", dedupKey=message["dedupKey"], dedupMode="active"),
            "deduplicated": True,
        }
        if debounced:
            reply["replaced"] = True
        return reply

    p = ClientPort(answer)
    try:
        with dtp.Client(p.address) as client:
            held = client.submit("SHA256", {}, dedup_key="k")
            assert (held.job_id, held.deduplicated, held.replaced) == ("held", True, False)
            assert (held.snapshot["dedupKey"], held.snapshot["dedupMode"]) == ("k", "active")
            again = client.submit("SHA256", {}, dedup_key="k", dedup_mode="debounce", delay_ms=1)
            assert (again.deduplicated, again.replaced) == (True, True)

        async def main() -> tuple[bool, bool]:
            async with dtp.AsyncClient(p.address) as aclient:
                handle = await aclient.submit(
                    "SHA256", {}, dedup_key="k", dedup_mode="debounce", delay_ms=1
                )
                return handle.deduplicated, handle.replaced

        assert asyncio.run(main()) == (True, True)
        jobs = [{"task_type": "SHA256", "payload": {}}] * 3
        with dtp.Client(p.address) as client:
            assert client.submit_batch(jobs) == {
                "jobIds": ["a", "a", "c"],
                "deduplicated": [False, True, False],
                "replaced": [False, True, False],
            }
            assert client.submit_many(jobs) == ["a", "a", "c"]
    finally:
        p.server.stop()
    plain = ClientPort()
    try:
        with dtp.Client(plain.address) as client:
            batch = client.submit_batch([{"task_type": "SHA256", "payload": {}}] * 2)
        assert batch == {
            "jobIds": ["j-0", "j-1"],
            "deduplicated": [False] * 2,
            "replaced": [False] * 2,
        }
    finally:
        p.server.stop()


def test_batches_flows_and_task_submit_carry_the_fields(port: ClientPort) -> None:
    task = dtp.Task("SHA256", lambda payload, ctx: None)
    with dtp.Client(port.address) as client:
        client.submit_many(
            [
                {"task_type": "SHA256", "payload": {}, "dedup_key": "a"},
                {"task_type": "SHA256", "payload": {}, "expire_after_ms": 1000},
                {"task_type": "SHA256", "payload": {}},
            ]
        )
        client.submit_flow(
            {
                "jobs": [
                    {
                        "ref": "x",
                        "task_type": "SHA256",
                        "payload": {},
                        "dedup_key": "fx",
                        "dedup_mode": "throttle",
                        "dedup_window_ms": 5,
                    },
                    {"ref": "y", "task_type": "SHA256", "payload": {}, "depends_on": ["x"]},
                ]
            }
        )
        assert task.submit({}, client=client, dedup_key="t").deduplicated is False

    async def main() -> None:
        async with dtp.AsyncClient(port.address) as aclient:
            done = await aclient.submit_batch(
                [{"task_type": "SHA256", "payload": {}, "dedup_key": "b"}]
            )
            assert done["deduplicated"] == [False]

    asyncio.run(main())
    first, second = port.of("SUBMIT_JOBS")
    a, b, c = first["jobs"]
    assert a["dedupKey"] == "a" and "expiresAtMillis" not in a
    assert b["expiresAtMillis"] > 0 and "dedupKey" not in b
    assert not set(DEDUP_FIELDS) & set(c)
    assert second["jobs"][0]["dedupKey"] == "b"
    (flow,) = port.of("SUBMIT_FLOW")
    x, y = flow["jobs"]
    assert (x["dedupKey"], x["dedupMode"], x["dedupWindowMillis"]) == ("fx", "throttle", 5)
    assert not set(DEDUP_FIELDS) & set(y)
    assert port.of("SUBMIT_JOB")[-1]["dedupKey"] == "t"


@pytest.mark.parametrize(
    ("options", "error", "text"),
    [
        ({"dedup_key": ""}, ValueError, "dedup_key must be 1..256 characters"),
        ({"dedup_key": "k" * 257}, ValueError, "dedup_key must be 1..256 characters"),
        ({"dedup_key": 7}, TypeError, "dedup_key must be a string"),
        ({"dedup_key": "k", "dedup_mode": "sometimes"}, ValueError, "dedup_mode must be one of"),
        ({"dedup_mode": "active"}, TypeError, "dedup_mode needs a dedup_key"),
        ({"dedup_key": "k", "dedup_mode": "throttle"}, TypeError, "needs dedup_window_ms"),
        ({"dedup_key": "k", "dedup_window_ms": 5}, TypeError, "goes only with dedup_mode="),
        (
            {"dedup_key": "k", "dedup_mode": "throttle", "dedup_window_ms": 0},
            ValueError,
            "dedup_window_ms must be an integer in 1..",
        ),
        (
            {"dedup_key": "k", "dedup_mode": "throttle", "dedup_window_ms": 367 * DAY_MS},
            ValueError,
            "dedup_window_ms must be an integer in 1..",
        ),
        ({"dedup_key": "k", "dedup_mode": "debounce"}, TypeError, "needs a delay"),
        ({"expires_at": 1000}, ValueError, "expires_at is in the past"),
        ({"expires_at": "tomorrow"}, TypeError, "expires_at must be an aware datetime"),
        (
            {"expires_at": datetime.datetime(2999, 1, 1)},
            ValueError,
            "aware datetime",
        ),
        ({"expire_after_ms": 0}, ValueError, "expire_after_ms must be 1.."),
        ({"expire_after_ms": 1.5}, TypeError, "expire_after_ms must be an integer"),
        (
            {"expire_after_ms": 10, "expires_at": 2**40},
            TypeError,
            "give one of expires_at, expires_at_ms, expire_after_ms, not expires_at and expire_after_ms",
        ),
        ({"expires_at_ms": 1000}, ValueError, "expires_at is in the past"),
        ({"expires_at_ms": 1.5e12}, TypeError, "expires_at_ms must be an integer"),
        (
            {"expires_at_ms": 2**41, "expires_at": 2**40},
            TypeError,
            "not expires_at and expires_at_ms",
        ),
    ],
)
def test_bad_dedup_and_expiry_options_are_refused_before_anything_is_sent(
    port: ClientPort, options: dict[str, Any], error: type[Exception], text: str
) -> None:
    with dtp.Client(port.address) as client:
        with pytest.raises(error, match=text):
            client.submit("SHA256", {}, **options)
        with pytest.raises(error, match=text):
            client.submit_many([{"task_type": "SHA256", "payload": {}, **options}])
        with pytest.raises(error, match=text):
            client.submit_flow(
                {"jobs": [{"ref": "r", "task_type": "SHA256", "payload": {}, **options}]}
            )
    assert port.requests == []


# ------------------------------------------------------------ the worker


def test_rate_limited_checks_its_arguments_and_copies() -> None:
    err = dtp.RateLimited(retry_after_ms=1500, scope="group")
    assert (err.retry_after_ms, err.scope, str(err)) == (1500, "group", err.message)
    assert err.message == "retry after 1500 ms (scope group)"
    assert dtp.RateLimited(retry_after_ms=1).scope == "job"
    for bad in (0, DAY_MS + 1):
        with pytest.raises(ValueError, match=r"retry_after_ms must be 1\.\.86400000"):
            dtp.RateLimited(retry_after_ms=bad)
    for wrong in (1.5, "10", True):
        with pytest.raises(TypeError, match="retry_after_ms must be an integer"):
            dtp.RateLimited(retry_after_ms=wrong)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="scope must be one of job, group, queue"):
        dtp.RateLimited(retry_after_ms=5, scope="tenant")
    with pytest.raises(TypeError, match="message must be a string"):
        dtp.RateLimited(retry_after_ms=5, message=7)  # type: ignore[arg-type]
    named = dtp.RateLimited(retry_after_ms=DAY_MS, scope="queue", message="429 from the API")
    for again in (copy.copy(named), pickle.loads(pickle.dumps(named))):
        assert (again.retry_after_ms, again.scope, again.message) == (
            DAY_MS,
            "queue",
            "429 from the API",
        )


def test_the_result_of_a_rate_limited_attempt_with_and_without_the_feature() -> None:
    sent = failure(7, dtp.RateLimited(retry_after_ms=250, scope="queue", message="slow down"))
    assert sent == {
        "type": "FAILED",
        "requestId": 7,
        "error": "RATE_LIMITED: slow down",
        "retryable": True,
        "rateLimited": {"retryAfterMillis": 250, "scope": "queue"},
    }
    outcome = _outcome("FAILED", sent)
    assert outcome.rate_limited == {"retryAfterMillis": 250, "scope": "queue"}
    offered = result_message("w", "j", "a", outcome, frozenset({"retryable", "rateLimits"}))
    assert offered["rateLimited"] == {"retryAfterMillis": 250, "scope": "queue"}
    assert (offered["success"], offered["error"]) == (False, "RATE_LIMITED: slow down")
    assert "retryable" not in offered
    plain = result_message("w", "j", "a", outcome, frozenset({"retryable"}))
    assert "rateLimited" not in plain and plain["error"] == "RATE_LIMITED: slow down"
    # Any other failure carries no rateLimited, whatever was offered.
    other = result_message(
        "w", "j", "a", Outcome(success=False, error="x"), frozenset({"rateLimits"})
    )
    assert "rateLimited" not in other


def assign(job: str, task_type: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "TASK_ASSIGN",
        "jobId": job,
        "attemptId": f"{job}-a1",
        "attemptNumber": 1,
        "taskType": task_type,
        "payload": payload,
    }


@pytest.mark.parametrize("offered", [True, False])
def test_the_worker_reports_rate_limited_handlers(cluster: Cluster, offered: bool) -> None:
    """Both kinds of handler (an isolated ``def``, a shared ``async def``), against a
    fake coordinator that offers ``rateLimits`` or not."""
    fake = FakeServer()
    try:
        cluster.py_worker(
            None,
            "py-limited",
            "--coordinator-host",
            f"{HOST}:{fake.port}",
            tasks=TASKS,
            capacity=2,
            wait=False,
        )
        conn = fake.next_connection()
        register = conn.recv()
        assert register is not None and register["type"] == "WORKER_REGISTER"
        features = ["retryable", "rateLimits"] if offered else ["retryable"]
        conn.send({"type": "WORKER_REGISTERED", "workerId": "py-limited", "features": features})
        conn.send(assign("j1", "py.rate_limited", {"ms": 1500, "scope": "group"}))
        first = conn.recv()
        conn.send(assign("j2", "py.rate_limited_async", {"ms": 20, "message": "429 Too Many"}))
        second = conn.recv()
    finally:
        fake.stop()
    assert first is not None and second is not None
    base = {"type": "TASK_RESULT", "workerId": "py-limited", "success": False, "result": None}
    expected_first: dict[str, Any] = {
        **base,
        "jobId": "j1",
        "attemptId": "j1-a1",
        "error": "RATE_LIMITED: retry after 1500 ms (scope group)",
    }
    expected_second: dict[str, Any] = {
        **base,
        "jobId": "j2",
        "attemptId": "j2-a1",
        "error": "RATE_LIMITED: 429 Too Many",
    }
    if offered:
        expected_first["rateLimited"] = {"retryAfterMillis": 1500, "scope": "group"}
        expected_second["rateLimited"] = {"retryAfterMillis": 20, "scope": "job"}
    assert first == expected_first
    assert second == expected_second


# ------------------------------------------------ a real coordinator
#
# The coordinator of this build deduplicates, expires jobs and honours
# rate-limited results (it offers the feature `rateLimits`).


def coordinator_features(c: Coordinator) -> set[str]:
    return set(c.proc.wait_for(r"coordinator started .*features=(\S+)").group(1).split(","))


def test_a_key_submitted_twice_in_active_mode_names_the_same_job(cluster: Cluster) -> None:
    c = cluster.coordinator()
    with c.client() as client:
        first = client.submit("SHA256", {"text": "a"}, dedup_key="report-7")
        again = client.submit("SHA256", {"text": "b"}, dedup_key="report-7")
        other = client.submit("SHA256", {"text": "c"}, dedup_key="report-8")
        status = client.status(first.job_id)
    assert (first.deduplicated, first.replaced) == (False, False)
    assert (again.job_id, again.deduplicated, again.replaced) == (first.job_id, True, False)
    assert other.job_id != first.job_id and other.deduplicated is False
    assert (status["dedupKey"], status["dedupMode"]) == ("report-7", "active")


def test_a_rate_limited_handler_schedules_its_job_again_without_using_an_attempt(
    cluster: Cluster,
) -> None:
    c = cluster.coordinator()
    assert "rateLimits" in coordinator_features(c)
    cluster.py_worker(c, "py-rate", tasks=TASKS)
    marker = cluster.dir / "limited-once"
    with c.client() as client:
        job = client.submit("py.rate_limited", {"ms": 600, "marker": str(marker)}, max_attempts=1)
        events = list(client.watch(job.job_id))
        done = client.status(job.job_id)
        attempts = client.attempts(job.job_id)
    states = [e["job"]["state"] for e in events]
    assert "SCHEDULED" in states, states
    scheduled = next(e["job"] for e in events if e["job"]["state"] == "SCHEDULED")
    assert int(scheduled.get("runAtMillis") or 0) >= scheduled["updatedAtMillis"] + 500
    # max_attempts=1, yet it ran again: the rate-limited attempt did not count.
    assert (done["state"], done["result"]) == ("COMPLETED", "done"), done
    assert marker.exists()
    assert attempts[0]["error"] == "RATE_LIMITED: retry after 600 ms (scope job)", attempts


def test_a_queue_scope_holds_the_queue_and_says_until_when(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.py_worker(c, "py-rate-queue", tasks=TASKS)
    with c.client() as client:
        before = int(time.time() * 1000)
        job = client.submit("py.rate_limited_async", {"ms": 60_000, "scope": "queue"}, queue="held")
        held = until(
            lambda: client.queues.get("held").get("rateLimitedUntilMillis"),
            30,
            "the queue to be held",
        )
        assert before + 60_000 <= held <= int(time.time() * 1000) + 60_000
        assert client.status(job.job_id)["state"] == "SCHEDULED"
        assert client.cancel(job.job_id)["cancelled"] is True


def test_debounce_replaces_and_expiry_cancels_a_job_not_started(cluster: Cluster) -> None:
    c = cluster.coordinator()
    with c.client() as client:
        first = client.submit(
            "SHA256", {"text": "a"}, dedup_key="d", dedup_mode="debounce", delay_ms=60_000
        )
        again = client.submit(
            "SHA256", {"text": "b"}, dedup_key="d", dedup_mode="debounce", delay_ms=120_000
        )
        assert (again.job_id, again.deduplicated, again.replaced) == (first.job_id, True, True)
        assert client.status(first.job_id)["dedupMode"] == "debounce"
        # No worker serves it: it expires while QUEUED.
        doomed = client.submit("SHA256", {"text": "c"}, expire_after_ms=300)
        assert doomed.snapshot.get("expiresAtMillis") is not None
        ended = client.wait(doomed.job_id, timeout=30)
    assert (ended["state"], ended.get("expired")) == ("CANCELLED", True), ended
    assert str(ended["error"]).startswith("EXPIRED:")
