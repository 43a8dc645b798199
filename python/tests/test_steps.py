"""The task-process side of durable steps, without a coordinator: what is
recorded and how a replay reads it (the TypeScript worker's rules), the
checks made before anything is sent, and the keys of ``ctx.enqueue``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from dtp.framing import Message
from dtp.worker.durable import (
    AttemptDurable,
    AttemptSteps,
    StepError,
    enqueue_message,
    parents_of,
    sleep_ms_of,
    step_json,
)


class FakeCalls:
    """Answers calls as a coordinator would: RECORD_STEP recorded, GET_STEPS from a list."""

    def __init__(self, stored: list[dict[str, Any]] | None = None) -> None:
        self.sent: list[Message] = []
        self.stored = list(stored or [])

    async def call(self, message: Message) -> Message:
        self.sent.append(message)
        if message["type"] == "GET_STEPS":
            return {"type": "STEPS", "steps": self.stored[message["fromIndex"] :][:1]}
        if message["type"] == "RECORD_STEP":
            return {"type": "STEP_RECORDED", "index": message["index"]}
        return {"type": "CHILD_ENQUEUED", "jobId": "child-1", "created": True}


def steps(calls: FakeCalls, recorded: list[dict[str, Any]], total: int) -> AttemptSteps:
    suspensions: list[Message] = []
    s = AttemptSteps(calls, "job-1", recorded, total, suspensions.append)  # type: ignore[arg-type]
    s.suspensions = suspensions  # type: ignore[attr-defined]
    return s


def test_a_first_run_records_and_a_replay_returns_the_recorded_value() -> None:
    calls = FakeCalls()
    first = steps(calls, [], 0)

    async def run() -> Any:
        async def body() -> dict[str, Any]:
            return {"n": 1.5, "items": [1, "a", None]}

        return await first.step("fetch", body)

    assert asyncio.run(run()) == {"n": 1.5, "items": [1, "a", None]}
    assert calls.sent == [
        {
            "type": "RECORD_STEP",
            "index": 0,
            "name": "fetch",
            "result": '{"n":1.5,"items":[1,"a",null]}',
        }
    ]
    # A later attempt: the value comes back, the function does not run.
    recorded = [{"name": "fetch", "result": '{"n":1.5}', "atMillis": 1}]
    replay = steps(FakeCalls(), recorded, 1)
    ran: list[int] = []
    assert asyncio.run(replay.step("fetch", lambda: ran.append(1))) == {"n": 1.5}
    assert ran == []


def test_steps_the_assignment_left_out_are_fetched() -> None:
    stored = [{"name": f"s{i}", "result": str(i), "atMillis": i} for i in range(3)]
    calls = FakeCalls(stored)
    replay = steps(calls, stored[:1], 3)

    async def run() -> list[Any]:
        return [await replay.step(f"s{i}", lambda: None) for i in range(3)]

    assert asyncio.run(run()) == [0, 1, 2]
    assert [m["fromIndex"] for m in calls.sent] == [1, 2]


def test_another_order_is_non_deterministic_for_good() -> None:
    recorded = [{"name": "a", "result": "1", "atMillis": 1}]
    replay = steps(FakeCalls(), recorded, 1)
    with pytest.raises(StepError) as err:
        asyncio.run(replay.step("b", lambda: 1))
    assert err.value.code == "NON_DETERMINISTIC"
    assert replay.poison is not None and replay.poison.startswith(
        'NON_DETERMINISTIC: step 0 was recorded as "a", this run calls "b" there'
    )
    with pytest.raises(StepError):  # whatever the handler does next
        asyncio.run(replay.step("c", lambda: 1))
    sleeping = steps(FakeCalls(), [{"name": "dtp.sleep", "result": "{}", "atMillis": 1}], 1)
    with pytest.raises(StepError, match=r'recorded as "dtp\.sleep"'):
        asyncio.run(sleeping.step("a", lambda: 1))


def test_names_values_and_one_at_a_time_are_checked() -> None:
    s = steps(FakeCalls(), [], 0)
    for bad in ("", " padded", "dtp.mine", "x" * 201):
        with pytest.raises(StepError, match=r"ctx\.step"):
            asyncio.run(s.step(bad, lambda: 1))
    with pytest.raises(StepError, match="not JSON: the value is a set"):
        step_json("s", {1, 2})
    with pytest.raises(StepError, match="not JSON"):
        step_json("s", float("nan"))

    async def twice() -> None:
        await s.step("once", lambda: 1)
        await s.step("once", lambda: 2)

    with pytest.raises(StepError, match="used twice"):
        asyncio.run(twice())

    async def together() -> None:
        async def slow() -> int:
            await asyncio.sleep(0.01)
            return 1

        await asyncio.gather(s.step("p", slow), s.step("q", slow))

    with pytest.raises(StepError, match="one at a time"):
        asyncio.run(together())


def test_a_sleep_or_wait_past_the_record_suspends_and_a_recorded_one_returns() -> None:
    s = steps(FakeCalls(), [], 0)

    async def sleep_then_never() -> None:
        await asyncio.wait_for(s.sleep(1500.2), 0.1)

    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(sleep_then_never())  # suspended: the handler never goes on
    assert s.suspensions == [{"sleepMillis": 1501}]  # type: ignore[attr-defined]

    outcome = {"jobId": "other", "state": "COMPLETED", "result": "[1]", "resultFormat": "json"}
    recorded = [
        {"name": "dtp.sleep", "result": '{"untilMillis":5}', "atMillis": 1},
        {"name": "dtp.waitFor", "result": json.dumps(outcome), "atMillis": 2},
    ]
    replay = steps(FakeCalls(), recorded, 2)

    async def run() -> Any:
        await replay.sleep(1500)
        return await replay.wait_for("other")

    assert asyncio.run(run()) == {
        "jobId": "other",
        "state": "COMPLETED",
        "result": [1],
        "error": None,
        "omitted": False,
    }
    with pytest.raises(StepError, match="cannot wait for itself"):
        asyncio.run(steps(FakeCalls(), [], 0).wait_for("job-1"))


def test_enqueue_keys_options_and_the_features_asked_for() -> None:
    assert enqueue_message(0, "t", {"a": 1}, {})["key"] == "o:0"
    keyed = enqueue_message(3, "t", {}, {"key": "mine", "queue": "q", "group_key": "g"})
    assert (keyed["key"], keyed["queue"], keyed["groupKey"]) == ("k:mine", "q", "g")
    assert "runAtMillis" in enqueue_message(0, "t", {}, {"delay_ms": 10})
    with pytest.raises(TypeError, match="unknown option 'countdown'"):
        enqueue_message(0, "t", {}, {"countdown": 1})
    with pytest.raises(ValueError, match="max_attempts"):
        enqueue_message(0, "t", {}, {"max_attempts": 0})

    calls = FakeCalls()
    run: Message = {"jobId": "job-1", "features": ["steps"]}
    durable = AttemptDurable(calls, run, lambda _: None)  # type: ignore[arg-type]
    with pytest.raises(StepError) as err:
        asyncio.run(durable.enqueue("t", {}, {}))
    assert err.value.code == "UNSUPPORTED_FEATURE" and calls.sent == []
    durable.features = frozenset()
    for call in (durable.step("s", lambda: 1), durable.sleep(1), durable.wait_for("other")):
        with pytest.raises(StepError) as err:
            asyncio.run(call)
        assert err.value.code == "UNSUPPORTED_FEATURE"
    assert calls.sent == []
    durable.features = frozenset({"children"})

    async def two() -> list[str]:
        return [await durable.enqueue("t", {}, {}), await durable.enqueue("t", {}, {})]

    assert asyncio.run(two()) == ["child-1", "child-1"]
    assert [m["key"] for m in calls.sent] == ["o:0", "o:1"]


def test_parents_are_decoded_as_results_are() -> None:
    run: Message = {
        "parents": [
            {
                "jobId": "p1",
                "taskType": "a",
                "state": "COMPLETED",
                "result": '{"x":1}',
                "resultFormat": "json",
            },
            {"jobId": "p2", "taskType": "b", "state": "FAILED", "result": None, "omitted": True},
        ]
    }
    assert parents_of(run) == [
        {
            "jobId": "p1",
            "taskType": "a",
            "state": "COMPLETED",
            "result": {"x": 1},
            "omitted": False,
        },
        {"jobId": "p2", "taskType": "b", "state": "FAILED", "result": None, "omitted": True},
    ]


def test_sleep_durations_as_both_workers_take_them() -> None:
    import datetime

    assert [sleep_ms_of(d) for d in (1500, 0.2, "500ms", "30s", "5m", "2h", "1d")] == [
        1500,
        1,
        500,
        30_000,
        300_000,
        7_200_000,
        86_400_000,
    ]
    assert sleep_ms_of(datetime.timedelta(seconds=2)) == 2000
    for bad in ("5", "1.5s", "-3s", "367d"):
        with pytest.raises(ValueError, match=r"ctx\.sleep"):
            sleep_ms_of(bad)
    with pytest.raises(TypeError, match=r"ctx\.sleep"):
        sleep_ms_of(None)
