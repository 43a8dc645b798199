"""dtp.Client against a real coordinator: every submit option, waiting,
results and their errors, cancel, paging, tokens."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

import dtp
from support import HOST, Cluster

TASKS = Path(__file__).parent / "fixtures" / "py_tasks.py"


def test_submit_options_status_wait_and_errors(cluster: Cluster) -> None:
    c = cluster.coordinator("--max-attempts", "3")
    with c.client() as client:
        # Nobody serves it yet: the job waits, and the handle says so.
        queued = client.submit(
            "py.upper",
            {"text": "later"},
            priority="HIGH",
            idempotency_key="key-1",
            max_attempts=5,
            timeout_millis=30_000,
        )
        assert queued.serving_workers == 0
        snap = queued.snapshot
        assert (snap["state"], snap["priority"], snap["maxAttempts"]) == ("QUEUED", "HIGH", 5)
        assert snap["timeoutMillis"] == 30_000 and snap["idempotencyKey"] == "key-1"
        again = client.submit(
            "py.upper",
            {"text": "later"},
            priority="HIGH",
            idempotency_key="key-1",
            max_attempts=5,
            timeout_millis=30_000,
        )
        assert again.job_id == queued.job_id
        with pytest.raises(dtp.RemoteError) as conflict:
            client.submit("py.upper", {"text": "other"}, idempotency_key="key-1")
        assert conflict.value.code == "IDEMPOTENCY_CONFLICT"
        with pytest.raises(dtp.WaitTimeoutError) as timed_out:
            queued.wait(timeout=0.2)
        assert timed_out.value.job["state"] == "QUEUED"
        assert isinstance(timed_out.value, TimeoutError)

        cluster.py_worker(c, "py-client", tasks=TASKS, capacity=2)
        assert queued.result(timeout=30) == "LATER"
        assert client.status(queued.job_id)["state"] == "COMPLETED"
        assert client.wait(queued.job_id)["result"] == "LATER"
        assert client.result(queued.job_id) == "LATER"

        with pytest.raises(dtp.RemoteError) as unknown:
            client.status("no-such-job")
        assert unknown.value.code == "UNKNOWN_JOB"
        with pytest.raises(dtp.RemoteError) as bad_type:
            client.submit("no spaces allowed", {})
        assert bad_type.value.code == "INVALID_TASK_TYPE"
        with pytest.raises(dtp.RemoteError) as bad_payload:
            client.submit("SHA256", {"text": 5})
        assert bad_payload.value.code == "INVALID_PAYLOAD"
        with pytest.raises(TypeError, match="unknown submit option 'delay'"):
            client.submit("py.upper", {"text": "x"}, delay=5)
        with pytest.raises(ValueError, match="priority"):
            client.submit("py.upper", {"text": "x"}, priority="URGENT")
        with pytest.raises(ValueError, match="max_attempts"):
            client.submit("py.upper", {"text": "x"}, max_attempts=0)

        def schema(payload: object) -> None:
            raise ValueError("text is required")

        with pytest.raises(dtp.InvalidPayloadError, match="Invalid payload: text is required"):
            client.submit("py.upper", {}, schema=schema)

        failed = client.submit("py.nonretryable", {})
        with pytest.raises(dtp.JobFailedError) as raised:
            failed.result(timeout=30)
        assert raised.value.job["state"] == "FAILED" and raised.value.code == "JOB_FAILED"

        busy = client.submit("py.cooperative", {})
        cancel = busy.cancel()
        assert cancel["cancelled"] is True and cancel["job"]["state"] == "CANCELLED"
        assert client.cancel(busy.job_id)["cancelled"] is False
        with pytest.raises(dtp.JobCancelledError):
            busy.result(timeout=10)
        assert [a["outcome"] for a in client.attempts(failed.job_id)] == ["FAILED"]
    with pytest.raises(dtp.ClientClosedError):
        client.status(queued.job_id)


def test_list_pages_through_every_job(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.py_worker(c, "py-list", tasks=TASKS, capacity=2)
    with c.client() as client:
        ids = [client.submit("py.upper", {"text": str(n)}).job_id for n in range(7)]
        failed = client.submit("py.nonretryable", {}).job_id
        for job_id in [*ids, failed]:
            client.wait(job_id, timeout=30)
        listed = [j["jobId"] for j in client.list(page_size=3)]
        assert listed == [failed, *reversed(ids)]  # newest first, across three pages
        assert [j["jobId"] for j in client.list(state="FAILED")] == [failed]
        assert len(list(client.list(task_type="py.upper", page_size=2))) == 7
        page, cursor = client.list_page(limit=5)
        assert len(page) == 5 and cursor is not None
        rest, end = client.list_page(limit=5, cursor=cursor)
        assert len(rest) == 3 and end is None


def test_client_tokens(cluster: Cluster) -> None:
    tokens = cluster.write("client.tokens", "client-secret\n")
    c = cluster.coordinator("--client-token-file", str(tokens))
    with dtp.Client(c.client_address, token="client-secret") as client:
        assert client.workers() == []
    with pytest.raises(dtp.AuthError) as refused:
        dtp.Client(c.client_address, token="wrong").workers()
    assert refused.value.code == "UNAUTHENTICATED"
    assert "wrong" not in c.proc.output
    with pytest.raises(dtp.RemoteError) as no_token:  # no AUTH first: refused and closed
        dtp.Client(c.client_address).workers()
    assert no_token.value.code == "UNAUTHENTICATED"


def test_default_address_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, cluster: Cluster
) -> None:
    c = cluster.coordinator()
    monkeypatch.setenv("DTP_HOST", HOST)
    monkeypatch.setenv("DTP_PORT", str(c.client_port))
    with dtp.Client() as client:
        assert client.address == c.client_address
        assert client.workers() == []


def test_delayed_job_is_shown_scheduled(cluster: Cluster) -> None:
    c = cluster.coordinator()
    submitted = cluster.cli(c, "submit", "sha256", "--text", "abc", "--delay", "1h")
    job_id = submitted["jobId"]
    with c.client() as client:
        snap = client.status(job_id)
        assert snap["state"] == "SCHEDULED"
        assert (snap["runAtMillis"] or 0) > snap["createdAtMillis"]
        jobs, _ = client.list_page(state="SCHEDULED")
        assert [j["jobId"] for j in jobs] == [job_id]
        assert client.cancel(job_id)["cancelled"] is True
        assert client.status(job_id)["state"] == "CANCELLED"


def test_dependent_job_is_shown_waiting(cluster: Cluster) -> None:
    c = cluster.coordinator()
    parent = cluster.cli(c, "submit", "sha256", "--text", "p", "--delay", "1h")["jobId"]
    child = cluster.cli(c, "submit", "sha256", "--text", "c", "--depends-on", parent)["jobId"]
    with c.client() as client:
        snap = client.status(child)
        assert snap["state"] == "WAITING" and snap["dependsOn"] == [parent]
        jobs, _ = client.list_page(state="WAITING")
        assert [j["jobId"] for j in jobs] == [child]
        assert client.cancel(parent)["cancelled"] is True
        assert client.status(child)["state"] == "CANCELLED"


def test_submits_a_delayed_job(cluster: Cluster) -> None:
    c = cluster.coordinator()
    with c.client() as client:
        later = client.submit("SHA256", {"text": "later"}, delay_ms=3_600_000)
        snap = client.status(later.job_id)
        assert snap["state"] == "SCHEDULED"
        assert (snap["runAtMillis"] or 0) >= snap["createdAtMillis"] + 3_500_000
        at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=2)
        dated = client.submit("SHA256", {"text": "dated"}, run_at=at)
        assert dated.status()["runAtMillis"] == int(at.timestamp() * 1000)
        with pytest.raises(TypeError, match="not both"):
            client.submit("SHA256", {"text": "x"}, delay_ms=1, run_at=at)
        with pytest.raises(ValueError, match="366 days"):
            client.submit("SHA256", {"text": "x"}, run_at=at + datetime.timedelta(days=400))
        with pytest.raises(ValueError, match="time zone"):
            client.submit("SHA256", {"text": "x"}, run_at=datetime.datetime(2030, 1, 1))


def test_submit_many_creates_a_batch_whole_or_not_at_all(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.py_worker(c, "py-many", tasks=TASKS, capacity=2)
    with c.client() as client:
        jobs = [
            {"task_type": "py.upper", "payload": {"text": "one"}},
            {"task_type": "py.upper", "payload": {"text": "two"}, "priority": "HIGH"},
            {"task_type": "py.upper", "payload": {"text": "three"}, "idempotency_key": "many-3"},
        ]
        ids = client.submit_many(jobs)
        assert len(ids) == 3 and len(set(ids)) == 3
        assert [client.result(i, timeout=30) for i in ids] == ["ONE", "TWO", "THREE"]
        assert client.status(ids[1])["priority"] == "HIGH"
        assert client.submit_many(jobs[2:])[0] == ids[2]  # a known key: the original job
        before = len(list(client.list()))
        with pytest.raises(dtp.RemoteError) as refused:
            client.submit_many([jobs[0], {"task_type": "no such task", "payload": {}}])
        assert refused.value.index == 1 and "index 1" in refused.value.message
        assert len(list(client.list())) == before  # nothing of the batch was created
        with pytest.raises(ValueError, match="takes 1"):
            client.submit_many([])
