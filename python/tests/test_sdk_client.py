"""The client's calls beyond submit-and-wait, against a real coordinator:
queues and group keys, dependencies, batches, flows, queue settings,
schedules, re-runs, features, watching and events, the typed errors,
``dtp.AsyncClient`` and ``Task.submit``."""

from __future__ import annotations

import asyncio
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

import dtp
from support import Cluster, until

FLOWS = Path(__file__).parent / "fixtures" / "py_flows.py"
P = {"durationMillis": 1}


def test_submit_options_queue_group_parents_and_unknown_options(cluster: Cluster) -> None:
    c = cluster.coordinator()
    with c.client() as client:
        with pytest.raises(TypeError, match="unknown submit option 'countdown'"):
            client.submit("SLEEP", {"durationMillis": 1}, countdown=5)
        with pytest.raises(TypeError, match="unknown submit option 'bogus'"):
            client.submit_many([{"task_type": "SLEEP", "payload": {}, "bogus": 1}])
        with pytest.raises(ValueError, match="queue must match"):
            client.submit("SLEEP", {"durationMillis": 1}, queue="no spaces")
        with pytest.raises(ValueError, match="on_parent_failure"):
            client.submit("SLEEP", {"durationMillis": 1}, on_parent_failure="maybe")
        with pytest.raises(TypeError, match="submit_flow"):
            client.submit_many([{"task_type": "SLEEP", "payload": {}, "depends_on": ["x"]}])
        assert client.list_page(limit=5)[0] == []  # nothing was sent above

        job = client.submit("SLEEP", {"durationMillis": 1}, queue="emails", group_key="tenant-1")
        assert (job.snapshot["queue"], job.snapshot["groupKey"]) == ("emails", "tenant-1")
        child = client.submit(
            "SLEEP", {"durationMillis": 1}, depends_on=[job.job_id], on_parent_failure="run"
        )
        assert child.snapshot["state"] == "WAITING"
        assert child.snapshot["dependsOn"] == [job.job_id]
        with pytest.raises(dtp.UnknownJobError) as unknown:
            client.submit("SLEEP", {"durationMillis": 1}, depends_on=["no-such-job"])
        assert unknown.value.code == "UNKNOWN_JOB"
        assert isinstance(unknown.value, dtp.RemoteError)

        ids = client.submit_many(
            [
                {"task_type": "SLEEP", "payload": {"durationMillis": 1}, "queue": "emails"},
                {"task_type": "SLEEP", "payload": {"durationMillis": 1}, "group_key": "t2"},
            ]
        )
        assert [client.status(i).get("queue") for i in ids] == ["emails", None]
        assert client.status(ids[1])["groupKey"] == "t2"

        cluster.ts_worker(c, "ts-options", capacity=4)
        assert child.result(timeout=30) == "slept 1 ms"
        assert client.status(job.job_id)["state"] == "COMPLETED"


def test_submit_flow_and_its_refusals(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.ts_worker(c, "ts-flow", capacity=4)
    with c.client() as client:
        existing = client.submit("SLEEP", {"durationMillis": 1})
        refs = client.submit_flow(
            {
                "jobs": [
                    # A forward ref, and a parent by id.
                    {
                        "ref": "last",
                        "task_type": "SLEEP",
                        "payload": {"durationMillis": 2},
                        "depends_on": ["first", existing.job_id],
                    },
                    {
                        "ref": "first",
                        "task_type": "SLEEP",
                        "payload": {"durationMillis": 1},
                        "queue": "flows",
                        "priority": "HIGH",
                    },
                ]
            }
        )
        assert sorted(refs) == ["first", "last"]
        assert client.result(refs["last"], timeout=30) == "slept 2 ms"
        first = client.status(refs["first"])
        assert (first["state"], first["queue"], first["priority"]) == ("COMPLETED", "flows", "HIGH")
        assert client.status(refs["last"])["dependsOn"] == [refs["first"], existing.job_id]

        with pytest.raises(dtp.RemoteError) as cycle:
            client.submit_flow(
                {
                    "jobs": [
                        {"ref": "a", "task_type": "SLEEP", "payload": P, "depends_on": ["b"]},
                        {"ref": "b", "task_type": "SLEEP", "payload": P, "depends_on": ["a"]},
                    ]
                }
            )
        assert cycle.value.code == "FLOW_CYCLE"
        with pytest.raises(TypeError, match="jobs\\[0\\]: unknown submit option 'nope'"):
            client.submit_flow({"jobs": [{"ref": "a", "task_type": "X", "payload": {}, "nope": 1}]})
        with pytest.raises(TypeError, match="ref"):
            client.submit_flow({"jobs": [{"task_type": "X", "payload": {}}]})


def test_queues_pause_resume_set_and_rerun(cluster: Cluster) -> None:
    c = cluster.coordinator()
    with c.client() as client:
        emails = client.queues.set(
            "emails", concurrency=2, rate_limit=(10, 1000), group_concurrency=1
        )
        assert emails["name"] == "emails"
        assert (emails["concurrency"], emails["groupConcurrency"]) == (2, 1)
        assert emails["rateLimit"] == {"max": 10, "intervalMillis": 1000}
        cleared = client.queues.set("emails", rate_limit=None)
        assert cleared["rateLimit"] is None and cleared["concurrency"] == 2
        with pytest.raises(ValueError, match="interval_ms"):
            client.queues.set("emails", rate_limit=(1, 0))
        assert client.queues.pause("emails")["paused"] is True
        assert [q["name"] for q in client.queues.list()] == ["emails"]

        paused = client.submit("SLEEP", {"durationMillis": 1}, queue="emails")
        assert paused.queue_paused is True
        cluster.ts_worker(c, "ts-queues", capacity=2)
        listed = client.worker_list()
        assert [w["workerId"] for w in listed["workers"]] == ["ts-queues"]
        assert (listed["leader"], listed["epoch"]) == (None, None)  # no shared database
        other = client.submit("SLEEP", {"durationMillis": 1})
        assert other.result(timeout=30) == "slept 1 ms"
        assert client.status(paused.job_id)["state"] == "QUEUED"  # its queue is paused
        assert client.queues.resume("emails")["paused"] is False
        assert paused.result(timeout=30) == "slept 1 ms"
        assert client.queues.get("emails")["counts"] == {"COMPLETED": 1}
        assert [j["jobId"] for j in client.list(queue="emails")] == [paused.job_id]

        with pytest.raises(dtp.UnknownQueueError):
            client.queues.resume("never-used")
        assert client.queues.resume("never-used", create=True)["created"] is True

        failed = client.submit("FAIL", {"failUntilAttempt": 2}, queue="emails", max_attempts=1)
        assert failed.wait(timeout=30)["state"] == "FAILED"
        rerun = client.rerun("emails", task_type="FAIL", max_attempts=3)
        assert rerun == {"rerun": 1, "jobIds": [failed.job_id], "more": False}
        assert failed.wait(timeout=30)["state"] == "COMPLETED"
        assert client.rerun("emails") == {"rerun": 0, "jobIds": [], "more": False}
        assert client.purge("COMPLETED", 0) == 3
        with pytest.raises(dtp.UnknownJobError):
            client.status(paused.job_id)


def test_schedules_every_call(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.ts_worker(c, "ts-schedules", capacity=2)
    with c.client() as client:
        made = client.schedules.set(
            "hourly",
            "SLEEP",
            payload={"durationMillis": 1},
            every_ms=3_600_000,
            overlap="skip",
            queue="reports",
        )
        assert (made["name"], made["everyMillis"], made["overlap"]) == ("hourly", 3_600_000, "skip")
        assert made["queue"] == "reports"
        cron = client.schedules.set(
            "nightly",
            "SLEEP",
            payload=P,
            cron="0 3 * * *",
            timezone="Europe/Paris",
            catch_up="none",
        )
        assert (cron["cron"], cron["timezone"], cron["catchUp"]) == (
            "0 3 * * *",
            "Europe/Paris",
            "none",
        )
        assert [s["name"] for s in client.schedules.list()] == ["hourly", "nightly"]
        assert client.schedules.pause("hourly")["nextRunAtMillis"] is None
        job = client.schedules.trigger("hourly")  # also while paused
        assert job.result(timeout=30) == "slept 1 ms"
        assert job.status()["scheduleName"] == "hourly"
        got = client.schedules.get("hourly")
        assert got["paused"] is True and got["recentJobs"][0]["jobId"] == job.job_id
        assert client.schedules.resume("hourly")["paused"] is False
        client.schedules.delete("hourly")
        with pytest.raises(dtp.UnknownScheduleError):
            client.schedules.get("hourly")
        with pytest.raises(dtp.RemoteError) as invalid:
            client.schedules.set("bad", "SLEEP", payload=P, cron="not a cron")
        assert invalid.value.code == "INVALID_SCHEDULE"
        with pytest.raises(TypeError, match="exactly one"):
            client.schedules.set("both", "SLEEP", cron="* * * * *", every_ms=1000)


def test_watch_and_events_are_pushed(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.ts_worker(c, "ts-watch", capacity=2)
    with c.client() as client:
        assert client.features() == {
            "waitJob": True,
            "time": True,
            "flows": True,
            "queues": True,
            "events": True,
            "signals": True,
        }
        seen: list[dtp.WatchEvent] = []
        events = client.events(queue="watched")  # subscribed: nothing from now on is missed
        job = client.submit("SLEEP", {"durationMillis": 300}, queue="watched")
        reader = threading.Thread(target=lambda: seen.extend(events), daemon=True)
        reader.start()
        client.submit("SLEEP", {"durationMillis": 1})  # another queue: not seen
        watched = [(e["event"], e["job"]["state"]) for e in client.watch(job.job_id)]
        assert watched[0][0] == "current" and watched[-1] == ("state", "COMPLETED")
        assert all(kind in ("current", "state", "progress") for kind, _ in watched)
        until(lambda: any(e["job"]["state"] == "COMPLETED" for e in seen), 10, "the event")
        events.close()
        reader.join(10)
        assert not reader.is_alive()
        assert {e["job"]["jobId"] for e in seen} == {job.job_id}
        assert all(set(e) == {"event", "atMillis", "job"} for e in seen)
        # A job that already ended: one event, and the iteration ends.
        assert [e["event"] for e in client.watch(job.job_id)] == ["current"]
        with pytest.raises(dtp.UnknownJobError):
            next(client.watch("no-such-job"))
        with client.events(task_type="SLEEP") as sleeps:
            later = client.submit("SLEEP", {"durationMillis": 1})
            first = next(sleeps)
        assert (first["event"], first["job"]["jobId"]) == ("state", later.job_id)
        assert sleeps.closed


def test_async_client_and_task_submit(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    c = cluster.coordinator()
    cluster.py_worker(c, "py-async", tasks=FLOWS, capacity=4)

    async def main() -> tuple[Any, ...]:
        async with dtp.AsyncClient(c.client_address) as client:
            async with client.events(queue="async") as events:
                job = await client.submit("py.double", {"n": 4}, queue="async")
                first = await events.__anext__()
            assert first["job"]["jobId"] == job.job_id
            states = [e["job"]["state"] async for e in client.watch(job.job_id)]
            many = await client.submit_many([{"task_type": "py.double", "payload": {"n": 1}}])
            refs = await client.submit_flow(
                {"jobs": [{"ref": "x", "task_type": "py.double", "payload": {"n": 2}}]}
            )
            queues = [q["name"] for q in await client.queues.list()]
            await client.schedules.set("async", "py.double", payload={"n": 3}, every_ms=60_000)
            triggered = await client.schedules.trigger("async")
            return (
                await job.result(timeout=30),
                states[-1],
                await client.result(many[0], timeout=30),
                await client.result(refs["x"], timeout=30),
                queues,
                await triggered.result(timeout=30),
                (await client.features())["events"],
            )

    assert asyncio.run(main()) == (8, "COMPLETED", 2, 4, ["async", "default"], 6, True)

    import importlib.util

    spec = importlib.util.spec_from_file_location("py_flows_module", FLOWS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    double: dtp.Task[Any] = module.double
    with c.client() as client:
        assert double.submit({"n": 21}, client=client).result(timeout=30) == 42
        dtp.set_default_client(client)
        try:
            handle = double.submit({"n": 5}, queue="default")
            assert handle.result(timeout=30) == 10
        finally:
            dtp.set_default_client(None)
    # Without one set: a client of DTP_HOST and DTP_PORT, made on first use.
    monkeypatch.setenv("DTP_HOST", c.client_address.split(":")[0])
    monkeypatch.setenv("DTP_PORT", str(c.client_port))
    try:
        assert double.submit({"n": 6}).result(timeout=30) == 12
        assert dtp.default_client().address == c.client_address
    finally:
        dtp.default_client().close()
        dtp.set_default_client(None)
    assert asyncio.run(double({"n": 1}, None)) == 2  # still the function, called directly


def test_a_watch_goes_on_across_a_coordinator_restart(cluster: Cluster, tmp_path: Path) -> None:
    db = str(tmp_path / "jobs.db")
    c = cluster.coordinator("--database", db)
    gaps: list[dict[str, Any]] = []
    with c.client() as client:
        job = client.submit("py.double", {"n": 8})  # nobody serves it yet
        with client.watch(job.job_id, on_gap=gaps.append) as watch:
            first = next(watch)
            assert (first["event"], first["job"]["state"]) == ("current", "QUEUED")
            c.proc.signal(signal.SIGKILL)
            c.proc.wait_exit()
            again = cluster.coordinator("--database", db, ports=(c.worker_port, c.client_port))
            cluster.py_worker(again, "py-after-restart", tasks=FLOWS)
            rest = [(e["event"], e["job"]["state"]) for e in watch]
        assert rest[-1] == ("state", "COMPLETED")
        assert gaps[:1] == [{"reason": "reconnected", "missed": None}]
        assert job.result(timeout=30) == 16


def test_shards_of_an_unsharded_coordinator_is_one_shard_its_own(cluster: Cluster) -> None:
    c = cluster.coordinator()
    with c.client() as client:
        shards = client.shards()
    address = f"127.0.0.1:{c.client_port}"
    assert [(s["shard"], s["leader"], s["epoch"]) for s in shards["shards"]] == [(0, address, 0)]
    assert shards["coordinators"] == [
        {"address": address, "workerAddress": f"127.0.0.1:{c.worker_port}", "shards": 1}
    ]
