"""Signals, events and triggers against a real coordinator: a Python handler
waiting for a signal that ``client.signal`` sends, an event that wakes the
Python handler waiting with its key (and not the one waiting with another),
a publish whose trigger creates a job, an event id published twice, and the
TypeScript CLI signalling and publishing to Python handlers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import dtp
from support import Cluster, until

FLOWS = Path(__file__).parent / "fixtures" / "py_flows.py"


def waiting(client: dtp.Client, job_id: str) -> dict[str, Any]:
    """The job's ``waitingFor`` once it waits for something of its own."""

    def found() -> dict[str, Any] | None:
        snapshot = client.status(job_id)
        waits = snapshot.get("waitingFor")
        return dict(waits) if snapshot["state"] == "WAITING" and waits else None

    return until(found, 30, f"job {job_id} to wait")


def test_a_python_handler_waits_for_a_signal_that_client_signal_sends(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.py_worker(c, "py-signals", tasks=FLOWS, capacity=2)
    with c.client() as client:
        job = client.submit("py.await_signal", {"name": "approval"}, max_attempts=1)
        waits = waiting(client, job.job_id)
        assert (waits.get("signal"), waits.get("untilMillis")) == ("approval", None)
        signalled = client.signal(job.job_id, "approval", {"by": "ana"})
        assert signalled == {
            "jobId": job.job_id,
            "name": "approval",
            "resumed": True,
            "signalsHeld": 0,
        }
        value = job.result(timeout=30)
        assert value["before"] == {"attempt": 1}  # the step ran once, replayed after
        assert value["attempt"] == 2
        signal = value["signal"]
        assert (signal["name"], signal["payload"]) == ("approval", {"by": "ana"})
        assert isinstance(signal["atMillis"], int) and signal["atMillis"] > 0
        done = client.status(job.job_id)
        assert [s["name"] for s in done.get("steps") or []] == ["before", "dtp.waitForSignal"]
        assert done.get("suspensions") == 1  # the wait did not use the one attempt

        # A signal sent before the wait is held, and taken at once when it begins.
        early = client.submit("py.await_signal", {"name": "early"}, delay_ms=60_000)
        held = client.signal(early.job_id, "early", 7)
        assert (held["resumed"], held["signalsHeld"]) == (False, 1)
        assert client.status(early.job_id).get("signalsHeld") == 1
        assert client.signal(early.job_id, "early", 8)["signalsHeld"] == 2
        # A timeout that passes first gives None.
        timed = client.submit("py.await_signal", {"name": "never", "timeout": "200ms"})
        assert timed.result(timeout=30)["signal"] is None

        with pytest.raises(dtp.UnknownJobError):
            client.signal("no-such-job", "approval")
        with pytest.raises(dtp.RemoteError) as ended:
            client.signal(job.job_id, "approval")
        assert ended.value.code == "INVALID_REQUEST" and "has ended" in ended.value.message


def test_an_event_wakes_the_python_handler_waiting_with_its_key(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.py_worker(c, "py-events", tasks=FLOWS, capacity=4)
    with c.client() as client:
        mine = client.submit("py.await_event", {"name": "parcel.delivered", "key": "p-1"})
        other = client.submit("py.await_event", {"name": "parcel.delivered", "key": "p-2"})
        for job in (mine, other):
            waits = waiting(client, job.job_id)
            assert waits.get("event") == "parcel.delivered"
        assert waiting(client, mine.job_id).get("key") == "p-1"
        published = client.publish("parcel.delivered", {"where": "door"}, key="p-1")
        assert (published["resumed"], published["jobIds"], published["duplicate"]) == (
            1,
            [],
            False,
        )
        event = mine.result(timeout=30)["event"]
        assert event["name"] == "parcel.delivered" and event["key"] == "p-1"
        assert event["payload"] == {"where": "door"}
        assert event["eventId"] == published["eventId"]
        assert client.status(other.job_id)["state"] == "WAITING"
        client.publish("parcel.delivered", None, key="p-2")
        assert other.result(timeout=30)["event"]["payload"] is None


def test_a_publish_with_a_trigger_creates_a_job(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.py_worker(c, "py-triggers", tasks=FLOWS, capacity=2)
    with c.client() as client:
        trigger = client.triggers.set(
            "on-paid", event="order.paid", task_type="py.on_event", max_attempts=2
        )
        assert (trigger["name"], trigger["event"], trigger["taskType"]) == (
            "on-paid",
            "order.paid",
            "py.on_event",
        )
        assert (trigger["queue"], trigger["maxAttempts"]) == ("default", 2)
        assert [t["name"] for t in client.triggers.list()] == ["on-paid"]
        published = client.publish("order.paid", {"order": 7})
        (job_id,) = published["jobIds"]
        assert client.result(job_id, timeout=30) == {"got": {"order": 7}, "by": "python"}
        snapshot = client.status(job_id)
        assert (snapshot["taskType"], snapshot["maxAttempts"]) == ("py.on_event", 2)
        # A payload that is not a JSON object reaches the job as {"value": ...}.
        (listed,) = client.publish("order.paid", [1, 2])["jobIds"]
        assert client.result(listed, timeout=30) == {"got": {"value": [1, 2]}, "by": "python"}
        assert client.triggers.delete("on-paid") is True
        assert client.triggers.delete("on-paid") is False
        assert client.triggers.list() == []
        assert client.publish("order.paid", {"order": 8})["jobIds"] == []


def test_an_event_id_published_twice_does_nothing_the_second_time(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.py_worker(c, "py-dup", tasks=FLOWS, capacity=2)
    with c.client() as client:
        client.triggers.set("on-paid", event="order.paid", task_type="py.on_event")
        first = client.publish("order.paid", {"order": 1}, event_id="order-1-paid")
        assert first["eventId"] == "order-1-paid" and not first["duplicate"]
        again = client.publish("order.paid", {"order": 1}, event_id="order-1-paid")
        assert again["duplicate"] is True
        assert (again["eventId"], again["jobIds"]) == ("order-1-paid", first["jobIds"])
        assert len(list(client.list(task_type="py.on_event"))) == 1


def test_the_async_client_signals_and_publishes(cluster: Cluster) -> None:
    import asyncio

    c = cluster.coordinator()
    cluster.py_worker(c, "py-async", tasks=FLOWS, capacity=2)

    async def run() -> dict[str, Any]:
        async with dtp.AsyncClient(c.client_address) as client:
            job = await client.submit("py.await_signal", {"name": "go"})
            sent = await client.signal(job.job_id, "go", "now")
            assert sent["name"] == "go"
            await client.triggers.set("t", event="e", task_type="py.on_event")
            published = await client.publish("e", {"n": 1}, event_id="e-1")
            assert [t["name"] for t in await client.triggers.list()] == ["t"]
            assert await client.triggers.delete("t") is True
            value: dict[str, Any] = await job.result(timeout=30)
            assert len(published["jobIds"]) == 1
            return value

    assert asyncio.run(run())["signal"]["payload"] == "now"


def test_the_typescript_cli_signals_and_publishes_to_python_handlers(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.py_worker(c, "py-cli", tasks=FLOWS, capacity=2)
    with c.client() as client:
        job = client.submit("py.await_signal", {"name": "approve"})
        keyed = client.submit("py.await_event", {"name": "paid", "key": "A-17"})
        waiting(client, job.job_id)
        waiting(client, keyed.job_id)
        sent = cluster.cli(c, "signal", job.job_id, "approve", "--payload", '{"by": "cli"}')
        assert sent == {"jobId": job.job_id, "name": "approve", "resumed": True, "signalsHeld": 0}
        assert job.result(timeout=30)["signal"]["payload"] == {"by": "cli"}
        published = cluster.cli(c, "publish", "paid", "--payload", "7", "--key", "A-17")
        assert (published["jobIds"], published["resumed"]) == ([], 1)
        event = keyed.result(timeout=30)["event"]
        assert (event["payload"], event["key"], event["eventId"]) == (
            7,
            "A-17",
            published["eventId"],
        )
