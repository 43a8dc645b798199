"""Signals, events and triggers without a real coordinator: what
``ctx.wait_for_signal`` / ``ctx.wait_for_event`` suspend with and how a replay
reads the recorded wait (the TypeScript worker's rules), the same through a
real Python worker against a fake coordinator, and the requests and replies
of ``client.signal``, ``client.publish`` and ``client.triggers``."""

from __future__ import annotations

import asyncio
import datetime
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import dtp
from dtp.framing import Message
from dtp.worker.durable import AttemptDurable, AttemptSteps, StepError
from fakes import FakeConn, FakeServer
from support import HOST, Cluster

FLOWS = Path(__file__).parent / "fixtures" / "py_flows.py"


class FakeCalls:
    """Answers RECORD_STEP as a coordinator would; GET_STEPS from a list."""

    def __init__(self, stored: list[dict[str, Any]] | None = None) -> None:
        self.sent: list[Message] = []
        self.stored = list(stored or [])

    async def call(self, message: Message) -> Message:
        self.sent.append(message)
        if message["type"] == "GET_STEPS":
            return {"type": "STEPS", "steps": self.stored[message["fromIndex"] :]}
        return {"type": "STEP_RECORDED", "index": message["index"]}


def durable(
    recorded: list[dict[str, Any]], features: tuple[str, ...] = ("steps", "signals")
) -> Any:
    """An attempt's durable calls; ``.suspensions`` lists what it suspended with."""
    suspensions: list[Message] = []
    run: Message = {
        "jobId": "job-1",
        "steps": recorded,
        "stepCount": len(recorded),
        "features": list(features),
    }
    d = AttemptDurable(FakeCalls(), run, suspensions.append)  # type: ignore[arg-type]
    d.suspensions = suspensions  # type: ignore[attr-defined]
    return d


def suspends(call: Any) -> None:
    """Runs a call that must suspend: the handler then waits for good."""

    async def run() -> None:
        await asyncio.wait_for(call, 0.1)

    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(run())


def step(name: str, value: Any) -> dict[str, Any]:
    return {"name": name, "result": json.dumps(value), "atMillis": 1}


# ------------------------------------------------------- the worker's side


def test_a_wait_past_the_record_suspends_with_the_wire_fields() -> None:
    d = durable([])
    suspends(d.wait_for_signal("approval", None))
    timed = durable([])
    suspends(timed.wait_for_signal("approval", "30s"))
    keyed = durable([])
    suspends(keyed.wait_for_event("order.paid", "order-7", datetime.timedelta(minutes=5)))
    anykey = durable([])
    suspends(anykey.wait_for_event("order.paid", None, 1500.2))
    zero = durable([])
    suspends(zero.wait_for_signal("approval", "0s"))
    assert zero.suspensions == [{"waitForSignal": {"name": "approval", "timeoutMillis": 0}}]
    assert d.suspensions == [{"waitForSignal": {"name": "approval"}}]
    assert timed.suspensions == [{"waitForSignal": {"name": "approval", "timeoutMillis": 30_000}}]
    assert keyed.suspensions == [
        {"waitForEvent": {"name": "order.paid", "key": "order-7", "timeoutMillis": 300_000}}
    ]
    assert anykey.suspensions == [{"waitForEvent": {"name": "order.paid", "timeoutMillis": 1501}}]


def test_a_replay_returns_the_recorded_signal_or_event_or_none() -> None:
    signal = {"name": "approval", "payload": {"ok": True}, "atMillis": 42}
    event = {"name": "paid", "payload": [1], "key": "k", "eventId": "e-1", "atMillis": 43}
    d = durable(
        [
            step("first", 1),
            step("dtp.waitForSignal", {"signal": signal}),
            step("dtp.waitForSignal", {"signal": None}),
            step("dtp.waitForEvent", {"event": event}),
            step("dtp.waitForEvent", {"event": None}),
        ]
    )

    async def run() -> list[Any]:
        return [
            await d.steps.step("first", lambda: 0),
            await d.wait_for_signal("approval", None),
            await d.wait_for_signal("approval", 10),
            await d.wait_for_event("paid", "k", None),
            await d.wait_for_event("paid", None, "1h"),
        ]

    assert asyncio.run(run()) == [1, signal, None, event, None]
    assert d.suspensions == [] and d.calls.sent == []


def test_a_replay_that_waits_for_something_else_is_non_deterministic() -> None:
    signal = {"name": "approval", "payload": None, "atMillis": 1}
    other = durable([step("dtp.waitForSignal", {"signal": signal})])
    with pytest.raises(StepError) as err:
        asyncio.run(other.wait_for_signal("rejection", None))
    assert err.value.code == "NON_DETERMINISTIC"
    assert other.steps.poison.startswith(
        'NON_DETERMINISTIC: position 0 took signal "approval", this run waits for "rejection"'
    )
    event = {"name": "paid", "payload": None, "key": "a", "eventId": "e", "atMillis": 1}
    rekeyed = durable([step("dtp.waitForEvent", {"event": event})])
    with pytest.raises(StepError, match=r'woke on event "paid" \(key "a"\).*\(key "b"\)'):
        asyncio.run(rekeyed.wait_for_event("paid", "b", None))
    slept = durable([step("dtp.sleep", {"untilMillis": 5})])
    with pytest.raises(StepError, match=r'recorded as "dtp\.sleep", this run calls "dtp\.waitFor'):
        asyncio.run(slept.wait_for_signal("approval", None))
    waited = durable([step("dtp.waitForSignal", {"signal": None})])
    with pytest.raises(StepError, match="NON_DETERMINISTIC"):
        asyncio.run(waited.wait_for_event("approval", None, None))


def test_a_recorded_value_that_is_no_wait_outcome_is_an_error() -> None:
    still = durable([step("dtp.waitForSignal", {"waitingFor": {"signal": "a"}})])
    with pytest.raises(StepError, match="the wait has not ended") as err:
        asyncio.run(still.wait_for_signal("a", None))
    assert err.value.code == "UNEXPECTED_REPLY"
    odd = durable([step("dtp.waitForEvent", {"event": 3})])
    with pytest.raises(StepError, match='"event" is not an object'):
        asyncio.run(odd.wait_for_event("a", None, None))


def test_waits_fetch_steps_the_assignment_left_out() -> None:
    stored = [step("a", 1), step("dtp.waitForSignal", {"signal": None})]
    calls = FakeCalls(stored)
    steps = AttemptSteps(calls, "job-1", stored[:1], 2, lambda _: None)  # type: ignore[arg-type]

    async def run() -> Any:
        await steps.step("a", lambda: 0)
        return await steps.wait_for_signal("s", None)

    assert asyncio.run(run()) is None
    assert calls.sent == [{"type": "GET_STEPS", "fromIndex": 1}]


def test_arguments_are_checked_and_signals_must_be_offered() -> None:
    d = durable([])
    for bad_name in ("", "1st", "has space", "x" * 65):
        with pytest.raises(ValueError, match=r"ctx\.wait_for_signal: the name must match"):
            asyncio.run(d.wait_for_signal(bad_name, None))
    with pytest.raises(TypeError, match=r"ctx\.wait_for_event: the name must be a string"):
        asyncio.run(d.wait_for_event(7, None, None))
    for bad_timeout in (-1, "367d"):
        with pytest.raises(ValueError, match="must be 0 to"):
            asyncio.run(d.wait_for_signal("a", bad_timeout))
    with pytest.raises(ValueError, match=r"expected a whole number and a unit"):
        asyncio.run(d.wait_for_signal("a", "soon"))
    for bad_key in ("", "k" * 257, 5):
        with pytest.raises(ValueError, match=r"key must be a string of 1\.\.256"):
            asyncio.run(d.wait_for_event("a", bad_key, None))
    assert d.suspensions == []

    without = durable([], features=("steps",))
    for call in (without.wait_for_signal("a", None), without.wait_for_event("a", None, None)):
        with pytest.raises(StepError) as err:
            asyncio.run(call)
        assert err.value.code == "UNSUPPORTED_FEATURE"
        assert 'does not offer signals and events (feature "signals")' in err.value.message
    ctx = dtp.TaskContext(
        job_id="j", attempt_id="a", attempt_number=1, max_attempts=None, deadline_at_ms=None,
        task_type="t",
    )  # fmt: skip
    with pytest.raises(dtp.DtpError, match="belongs to no worker"):
        asyncio.run(ctx.wait_for_signal("a"))


# --------------------------------------- a real worker, a fake coordinator


def assignment(attempt: int, steps: list[dict[str, Any]], payload: dict[str, Any]) -> Message:
    return {
        "type": "TASK_ASSIGN",
        "jobId": "job-s",
        "attemptId": f"a{attempt}",
        "attemptNumber": attempt,
        "taskType": "py.await_signal",
        "payload": payload,
        "steps": steps,
        "stepCount": len(steps),
    }


def registered(
    cluster: Cluster, worker_id: str, features: list[str]
) -> tuple[FakeServer, FakeConn]:
    fake = FakeServer()
    cluster.py_worker(
        None, worker_id, "--coordinator-host", f"{HOST}:{fake.port}", tasks=FLOWS, wait=False
    )
    conn = fake.next_connection()
    register = conn.recv()
    assert register is not None and register["type"] == "WORKER_REGISTER"
    conn.send({"type": "WORKER_REGISTERED", "workerId": worker_id, "features": features})
    return fake, conn


def test_a_python_worker_suspends_with_task_suspend_and_replays_the_signal(
    cluster: Cluster,
) -> None:
    fake, conn = registered(cluster, "py-sig", ["heartbeatAck", "steps", "signals"])
    try:
        conn.send(assignment(1, [], {"name": "approval", "timeout": "2h"}))
        record = conn.recv()
        assert record is not None and record["type"] == "RECORD_STEP", record
        assert (record["name"], record["index"], record["result"]) == (
            "before",
            0,
            '{"attempt":1}',
        )
        conn.send(
            {
                "type": "STEP_RECORDED",
                "requestId": record["requestId"],
                "jobId": "job-s",
                "index": 0,
            }
        )
        assert conn.recv() == {
            "type": "TASK_SUSPEND",
            "workerId": "py-sig",
            "jobId": "job-s",
            "attemptId": "a1",
            "waitForSignal": {"name": "approval", "timeoutMillis": 7_200_000},
        }
        signal = {"name": "approval", "payload": {"by": "ana"}, "atMillis": 7}
        recorded = [
            {"name": "before", "result": '{"attempt":1}', "atMillis": 1},
            {"name": "dtp.waitForSignal", "result": json.dumps({"signal": signal}), "atMillis": 2},
        ]
        conn.send(assignment(2, recorded, {"name": "approval", "timeout": "2h"}))
        result = conn.recv()
        assert result is not None and result["type"] == "TASK_RESULT" and result["success"]
        assert json.loads(result["result"]) == {
            "before": {"attempt": 1},
            "signal": signal,
            "attempt": 2,
        }
    finally:
        fake.stop()


def test_a_python_worker_refuses_signal_waits_without_the_feature(cluster: Cluster) -> None:
    fake, conn = registered(cluster, "py-nosig", ["heartbeatAck", "steps"])
    try:
        recorded = [{"name": "before", "result": "{}", "atMillis": 1}]
        conn.send(assignment(1, recorded, {"name": "approval"}))
        result = conn.recv()
        assert result is not None and result["type"] == "TASK_RESULT", result
        assert result["success"] is False
        assert "ctx.wait_for_signal: the coordinator does not offer signals" in result["error"]
    finally:
        fake.stop()


# ---------------------------------------------------------- the client side


class SignalsPort:
    """A client port that answers the signal requests from ``answers`` (by type)."""

    def __init__(self, answers: dict[str, Callable[[Message], Message]]) -> None:
        self.requests: list[Message] = []
        self._answers = answers
        self._lock = threading.Lock()
        self.server = FakeServer(self._serve)

    def _serve(self, conn: FakeConn) -> None:
        while True:
            message = conn.recv(timeout=30, skip=())
            if message is None:
                return
            with self._lock:
                self.requests.append(message)
            conn.send(self._answers[message["type"]](message))

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.port}"


TRIGGER = {
    "name": "bill",
    "event": "order.paid",
    "taskType": "billing.charge",
    "queue": "default",
    "priority": None,
    "maxAttempts": 3,
    "createdAtMillis": 1,
    "updatedAtMillis": 2,
}


def answers() -> dict[str, Callable[[Message], Message]]:
    def signalled(m: Message) -> Message:
        if m["jobId"] == "gone":
            return {"type": "ERROR", "code": "UNKNOWN_JOB", "message": "Unknown job: gone"}
        return {
            "type": "JOB_SIGNALLED",
            "jobId": m["jobId"],
            "name": m["name"],
            "resumed": True,
            "signalsHeld": 0,
        }

    return {
        "SIGNAL_JOB": signalled,
        "PUBLISH_EVENT": lambda m: {
            "type": "EVENT_PUBLISHED",
            "eventId": m.get("eventId", "ev-made"),
            "jobIds": ["j1", "j2"],
            "resumed": 3,
            **({"duplicate": True} if m.get("eventId") == "seen" else {}),
        },
        "SET_TRIGGER": lambda m: {"type": "TRIGGER_INFO", "trigger": TRIGGER},
        "LIST_TRIGGERS": lambda m: {"type": "TRIGGER_LIST", "triggers": [TRIGGER]},
        "DELETE_TRIGGER": lambda m: {"type": "TRIGGER_DELETED", "name": m["name"], "deleted": True},
    }


@pytest.fixture
def port() -> Iterator[SignalsPort]:
    p = SignalsPort(answers())
    try:
        yield p
    finally:
        p.server.stop()


def test_the_client_sends_the_requests_and_reads_the_replies(port: SignalsPort) -> None:
    with dtp.Client(port.address) as client:
        assert client.signal("job-1", "approval", {"by": "ana"}) == {
            "jobId": "job-1",
            "name": "approval",
            "resumed": True,
            "signalsHeld": 0,
        }
        client.signal("job-1", "nudge")
        assert client.publish("order.paid", {"order": 7}, key="7", event_id="seen") == {
            "eventId": "seen",
            "jobIds": ["j1", "j2"],
            "resumed": 3,
            "duplicate": True,
        }
        assert client.publish("order.paid")["duplicate"] is False
        assert (
            client.triggers.set(
                "bill", event="order.paid", task_type="billing.charge", max_attempts=3
            )
            == TRIGGER
        )
        client.triggers.set(
            "ship", event="order.paid", task_type="ship", queue="ops", priority="HIGH"
        )
        assert client.triggers.list() == [TRIGGER]
        assert client.triggers.delete("bill") is True
    assert port.requests == [
        {"type": "SIGNAL_JOB", "jobId": "job-1", "name": "approval", "payload": {"by": "ana"}},
        {"type": "SIGNAL_JOB", "jobId": "job-1", "name": "nudge", "payload": None},
        {
            "type": "PUBLISH_EVENT",
            "name": "order.paid",
            "payload": {"order": 7},
            "key": "7",
            "eventId": "seen",
        },
        {"type": "PUBLISH_EVENT", "name": "order.paid", "payload": None},
        {
            "type": "SET_TRIGGER",
            "trigger": {
                "name": "bill",
                "event": "order.paid",
                "taskType": "billing.charge",
                "maxAttempts": 3,
            },
        },
        {
            "type": "SET_TRIGGER",
            "trigger": {
                "name": "ship",
                "event": "order.paid",
                "taskType": "ship",
                "queue": "ops",
                "priority": "HIGH",
            },
        },
        {"type": "LIST_TRIGGERS"},
        {"type": "DELETE_TRIGGER", "name": "bill"},
    ]


def test_the_async_client_does_the_same(port: SignalsPort) -> None:
    async def run() -> list[Any]:
        async with dtp.AsyncClient(port.address) as client:
            return [
                await client.signal("job-1", "approval", 1),
                await client.publish("order.paid", [1], key="k"),
                await client.triggers.set("bill", event="order.paid", task_type="billing.charge"),
                await client.triggers.list(),
                await client.triggers.delete("bill"),
            ]

    signalled, published, trigger, listed, deleted = asyncio.run(run())
    assert signalled["resumed"] is True and published["eventId"] == "ev-made"
    assert (trigger, listed, deleted) == (TRIGGER, [TRIGGER], True)
    assert [m["type"] for m in port.requests] == [
        "SIGNAL_JOB",
        "PUBLISH_EVENT",
        "SET_TRIGGER",
        "LIST_TRIGGERS",
        "DELETE_TRIGGER",
    ]


def test_errors_are_typed_and_bad_arguments_send_nothing(port: SignalsPort) -> None:
    with dtp.Client(port.address) as client:
        with pytest.raises(dtp.UnknownJobError):
            client.signal("gone", "approval")
        for bad in (
            lambda: client.signal("", "a"),
            lambda: client.signal("j", "no spaces"),
            lambda: client.signal("j", "a", {1, 2}),
            lambda: client.publish("e", float("nan")),
            lambda: client.publish("e", key=""),
            lambda: client.publish("e", event_id="x" * 257),
            lambda: client.triggers.set("t", event="e", task_type=""),
            lambda: client.triggers.set("t", event="e", task_type="x", priority="URGENT"),
            lambda: client.triggers.set("t", event="e", task_type="x", max_attempts=0),
            lambda: client.triggers.delete("bad name"),
        ):
            with pytest.raises((TypeError, ValueError)):
                bad()
        with pytest.raises(ValueError, match="at most 262144"):
            client.publish("e", "x" * (256 * 1024))
    assert [m.get("jobId") for m in port.requests] == ["gone"]


def test_without_signals_the_calls_are_unsupported_and_the_connection_dropped() -> None:
    refuse: Callable[[Message], Message] = lambda m: {  # noqa: E731
        "type": "ERROR",
        "code": "UNSUPPORTED_REQUEST",
        "message": f"Unsupported request {m['type']}",
    }
    port = SignalsPort(
        dict.fromkeys(("SIGNAL_JOB", "PUBLISH_EVENT", "SET_TRIGGER", "LIST_TRIGGERS"), refuse)
    )
    try:
        with dtp.Client(port.address) as client:
            for call in (
                lambda: client.signal("j", "a"),
                lambda: client.publish("e"),
                lambda: client.triggers.set("t", event="e", task_type="x"),
                lambda: client.triggers.list(),
            ):
                with pytest.raises(dtp.FeatureUnsupportedError) as err:
                    call()
                assert err.value.feature == "signals" and err.value.code == "UNSUPPORTED_FEATURE"
        # A v1 coordinator closes the connection after such an answer: each call dials anew.
        assert len(port.server.all) == 4
    finally:
        port.server.stop()


def test_a_signal_is_never_resent_and_an_event_only_with_its_id() -> None:
    from dtp.client import _is_safe_to_repeat

    assert not _is_safe_to_repeat({"type": "SIGNAL_JOB", "jobId": "j", "name": "a"})
    assert not _is_safe_to_repeat({"type": "PUBLISH_EVENT", "name": "e"})
    assert _is_safe_to_repeat({"type": "PUBLISH_EVENT", "name": "e", "eventId": "e-1"})
    assert _is_safe_to_repeat({"type": "LIST_TRIGGERS"})
