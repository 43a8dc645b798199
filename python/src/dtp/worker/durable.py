"""The task-process side of a running attempt's calls and durable steps:
``ctx.step``, ``ctx.sleep``, ``ctx.wait_for``, ``ctx.wait_for_signal``,
``ctx.wait_for_event``, ``ctx.enqueue`` (the same recorded values and replay
rules as the TypeScript worker's, so either may replay the other's steps).

Calls (``CallPort``): a handler's request to the coordinator (``RECORD_STEP``,
``GET_STEPS``, ``ENQUEUE_CHILD``) goes to the worker as ``CALL`` (requestId:
the attempt, callId: the call), which adds the ids and sends it; the
coordinator's reply, or an ``ERROR``, comes back as ``ANSWER``. It is awaited
on the event loop the handler runs on; the answer arrives on the process's
reader thread and is handed to that loop.

Steps (``AttemptSteps``) take positions in the order the handler calls them.
At a position the job has recorded (the assignment carried it, or
``GET_STEPS`` fetches it) the recorded value is returned and ``fn`` does not
run; past them ``fn`` runs, its value is checked and recorded
(``RECORD_STEP``), and the step returns once the coordinator has it durably.
Either way the handler gets the value as JSON gives it back. A position
recorded under another name (or as a sleep or wait) means the handler does
not call its steps in the same order as before: the attempt fails for good
with an error starting ``NON_DETERMINISTIC:``, whatever the handler does with
the error it is raised. A sleep or wait past the recorded steps suspends the
attempt (``SUSPENDED``: the worker sends ``TASK_SUSPEND``); the handler's task
is cancelled, and the coordinator records that step itself. Steps run one at
a time, and a name is used once per run of the handler.

Signal and event waits (feature ``signals``) suspend with ``waitForSignal:
{name, timeoutMillis?}`` or ``waitForEvent: {name, key?, timeoutMillis?}``;
the coordinator records them as ``dtp.waitForSignal`` / ``dtp.waitForEvent``,
and once the wait has ended the step's value is ``{"signal": {name, payload,
atMillis}}`` (``{"event": {name, payload, key, eventId, atMillis}}``), or
``{"signal": null}`` when the timeout passed first: the replayed call returns
that member. (While the job waits the value is ``{"waitingFor": ...}``, which
no run meets: the job does not run then.)
"""

from __future__ import annotations

import asyncio
import datetime
import inspect
import json
import re
import threading
import time
from collections.abc import Mapping
from typing import Any, Callable

from ..errors import DtpError, remote_error
from ..framing import Message, encode_json
from ..protocol import MAX_ATTEMPTS_LIMIT, MAX_TASK_TIMEOUT_MS, PRIORITIES
from ..shapes import ReceivedEvent, ReceivedSignal
from ..submission import _check_group_key, _run_at_millis, check_queue_name
from ..tasks import ResultNotJsonError, _check_json, result_bytes

SLEEP_STEP = "dtp.sleep"
WAIT_STEP = "dtp.waitFor"
SIGNAL_STEP = "dtp.waitForSignal"
EVENT_STEP = "dtp.waitForEvent"
MAX_EVENT_KEY_LENGTH = 256
RESERVED_PREFIX = "dtp."
MAX_STEP_NAME_LENGTH = 200
MAX_STEP_NAME_JSON_BYTES = 256
MAX_STEP_RESULT_BYTES = 960 * 1024
MAX_DELAY_MS = 366 * 86_400_000
MAX_JOB_ID_LENGTH = 200
MAX_CHILD_KEY_LENGTH = 256
MAX_CALLS_PER_ATTEMPT = 64

CALL_FEATURES = {"ENQUEUE_CHILD": "children", "RECORD_STEP": "steps", "GET_STEPS": "steps"}
"""The feature the coordinator must offer for each call."""


class StepError(DtpError):
    """``INVALID_STEP``, ``NON_DETERMINISTIC``, ``UNSUPPORTED_FEATURE``, ``CONNECTION_LOST``,
    ``TOO_MANY_CALLS``, ``LIMIT_EXCEEDED``: a call or step that could not be made;
    ``UNEXPECTED_REPLY``: a recorded value that is not what the step records."""


def _invalid(message: str) -> StepError:
    return StepError("INVALID_STEP", message)


class CallPort:
    """The calls of one attempt: sent as CALL, answered by ANSWER."""

    def __init__(self, request_id: int, send: Callable[[Message], None]) -> None:
        self._request_id = request_id
        self._send = send
        self._next = 1
        self._open: dict[int, asyncio.Future[Message]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    async def call(self, message: Message) -> Message:
        """Sends a call and returns its reply; an ``ERROR`` answer raises (``RemoteError``
        with the coordinator's code, or ``StepError`` with the worker's)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if len(self._open) >= MAX_CALLS_PER_ATTEMPT:
                raise StepError(
                    "TOO_MANY_CALLS",
                    f"at most {MAX_CALLS_PER_ATTEMPT} calls of one attempt may wait at once",
                )
            self._loop = loop
            call_id = self._next
            self._next += 1
            future: asyncio.Future[Message] = loop.create_future()
            self._open[call_id] = future
        self._send(
            {"type": "CALL", "requestId": self._request_id, "callId": call_id, "call": message}
        )
        try:
            reply = await future
        finally:
            with self._lock:
                self._open.pop(call_id, None)
        if reply.get("type") == "ERROR":
            code = reply.get("code")
            if code in ("UNSUPPORTED_FEATURE", "CONNECTION_LOST", "TOO_MANY_CALLS"):
                raise StepError(str(code), str(reply.get("message")))
            raise remote_error(reply)
        return reply

    def deliver(self, call_id: int, reply: Message) -> None:
        """An ANSWER, from any thread: settles its call on the handler's loop."""
        with self._lock:
            future = self._open.get(call_id)
            loop = self._loop
        if future is None or loop is None:
            return

        def settle() -> None:
            if not future.done():
                future.set_result(reply)

        loop.call_soon_threadsafe(settle)


def step_json(name: str, value: Any) -> str:
    """A step's value as JSON text; ``StepError`` for what JSON cannot carry back as it was."""
    try:
        _check_json(value, "the value", set())
    except ResultNotJsonError as err:
        raise _invalid(f'step "{name}": its value is not JSON: {err.detail}') from None
    text = encode_json(value)
    size = result_bytes(text)
    if size > MAX_STEP_RESULT_BYTES:
        raise StepError(
            "LIMIT_EXCEEDED",
            f'step "{name}": its value is {size} bytes as JSON; a step may hold at most '
            f"{MAX_STEP_RESULT_BYTES}",
        )
    return text


def _checked_name(name: Any) -> str:
    if not isinstance(name, str):
        raise _invalid("ctx.step: the name must be a string")
    if not name or name.strip() != name:
        raise _invalid("ctx.step: the name must be non-empty, without leading or trailing blanks")
    if len(name) > MAX_STEP_NAME_LENGTH or result_bytes(name) + 2 > MAX_STEP_NAME_JSON_BYTES:
        raise _invalid(
            f"ctx.step: the name must be at most {MAX_STEP_NAME_LENGTH} characters and "
            f"{MAX_STEP_NAME_JSON_BYTES} bytes as JSON"
        )
    if name.startswith(RESERVED_PREFIX):
        raise _invalid(f'ctx.step: names starting with "{RESERVED_PREFIX}" are reserved')
    return name


_DURATION = re.compile(r"([0-9]{1,15})(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def _duration_ms(duration: Any, what: str) -> float:
    """A duration in ms, as given: a number of ms, a ``datetime.timedelta``, or a whole
    number and a unit (``"500ms"``, ``"30s"``, ``"5m"``, ``"12h"``, ``"7d"``)."""
    if isinstance(duration, datetime.timedelta):
        return duration.total_seconds() * 1000
    if isinstance(duration, (int, float)) and not isinstance(duration, bool):
        return duration
    if isinstance(duration, str):
        match = _DURATION.fullmatch(duration.strip())
        if match is None:
            raise ValueError(
                f"{what}: expected a whole number and a unit (ms, s, m, h or d), like 30m, "
                f"got {duration[:40]!r}"
            )
        return int(match.group(1)) * _UNIT_MS[match.group(2)]
    raise TypeError(
        f"{what}: give a number of milliseconds, a datetime.timedelta or a duration like '5m'"
    )


def sleep_ms_of(duration: Any) -> int:
    """A sleep's length in ms: a number of ms, a ``datetime.timedelta``, or a duration as
    the TypeScript worker takes it (a whole number and a unit: ``"500ms"``, ``"30s"``,
    ``"5m"``, ``"12h"``, ``"7d"``)."""
    ms = _duration_ms(duration, "ctx.sleep")
    if not 0 <= ms <= MAX_DELAY_MS:
        raise ValueError(f"ctx.sleep: the duration must be 0..{MAX_DELAY_MS} ms")
    return int(-(-ms // 1))  # rounded up


def timeout_ms_of(timeout: Any, what: str) -> int | None:
    """A wait's timeout in ms (rounded up), taken as ``ctx.sleep`` takes a duration;
    None for none. 0 (only a signal already held; an event wait ends at once) to 366 days."""
    if timeout is None:
        return None
    ms = _duration_ms(timeout, what)
    if not 0 <= ms <= MAX_DELAY_MS:
        raise ValueError(f"{what}: the timeout must be 0 to {MAX_DELAY_MS} ms (366 days)")
    return int(-(-ms // 1))


def wait_name(name: Any, what: str) -> str:
    """The name a signal or event wait waits for: as a queue's."""
    if not isinstance(name, str):
        raise TypeError(f"{what}: the name must be a string")
    return check_queue_name(name, f"{what}: the name")


def signal_wait(name: Any, timeout: Any) -> Message:
    """``TASK_SUSPEND.waitForSignal`` of ``ctx.wait_for_signal`` (absent fields left out)."""
    what = "ctx.wait_for_signal"
    wait: Message = {"name": wait_name(name, what)}
    timeout_ms = timeout_ms_of(timeout, what)
    if timeout_ms is not None:
        wait["timeoutMillis"] = timeout_ms
    return wait


def event_wait(name: Any, key: Any, timeout: Any) -> Message:
    """``TASK_SUSPEND.waitForEvent`` of ``ctx.wait_for_event`` (absent fields left out)."""
    what = "ctx.wait_for_event"
    wait: Message = {"name": wait_name(name, what)}
    if key is not None:
        if not isinstance(key, str) or not 1 <= len(key) <= MAX_EVENT_KEY_LENGTH:
            raise ValueError(
                f"{what}: key must be a string of 1..{MAX_EVENT_KEY_LENGTH} characters"
            )
        wait["key"] = key
    timeout_ms = timeout_ms_of(timeout, what)
    if timeout_ms is not None:
        wait["timeoutMillis"] = timeout_ms
    return wait


def _recorded_member(step: str, result: Any, member: str) -> Mapping[str, Any] | None:
    """The member ``member`` of a recorded wait's value: an object, or None (timed out)."""
    value = json.loads(result if isinstance(result, str) else "null")
    if not isinstance(value, dict) or member not in value:
        what = (
            "the wait has not ended"
            if isinstance(value, dict) and "waitingFor" in value
            else "no value"
        )
        raise StepError("UNEXPECTED_REPLY", f"step {step}: {what} ({encode_json(value)[:200]})")
    taken = value[member]
    if taken is None:
        return None
    if not isinstance(taken, dict):
        raise StepError("UNEXPECTED_REPLY", f'step {step}: "{member}" is not an object')
    return taken


def recorded_signal(result: Any) -> ReceivedSignal | None:
    """A recorded signal wait's outcome: the signal it took, or None (timed out)."""
    signal = _recorded_member(SIGNAL_STEP, result, "signal")
    if signal is None:
        return None
    at = signal.get("atMillis")
    return {
        "name": str(signal.get("name") or ""),
        "payload": signal.get("payload"),
        "atMillis": at if isinstance(at, int) else 0,
    }


def recorded_event(result: Any) -> ReceivedEvent | None:
    """A recorded event wait's outcome: the event that woke it, or None (timed out)."""
    event = _recorded_member(EVENT_STEP, result, "event")
    if event is None:
        return None
    key, event_id, at = event.get("key"), event.get("eventId"), event.get("atMillis")
    return {
        "name": str(event.get("name") or ""),
        "payload": event.get("payload"),
        "key": key if isinstance(key, str) else None,
        "eventId": event_id if isinstance(event_id, str) else "",
        "atMillis": at if isinstance(at, int) else 0,
    }


def decode_result(result: Any, result_format: Any) -> Any:
    """A result as ``job.result()`` gives it: JSON text decoded, text as it is."""
    if isinstance(result, str) and result_format == "json":
        return json.loads(result)
    return result


def wait_outcome(outcome: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "jobId": outcome.get("jobId") if isinstance(outcome.get("jobId"), str) else "",
        "state": outcome.get("state") if isinstance(outcome.get("state"), str) else None,
        "result": decode_result(outcome.get("result"), outcome.get("resultFormat")),
        "error": outcome.get("error") if isinstance(outcome.get("error"), str) else None,
        "omitted": outcome.get("omitted") is True,
    }


class AttemptSteps:
    def __init__(
        self,
        calls: CallPort,
        job_id: str,
        recorded: list[Mapping[str, Any]],
        total: int,
        on_suspend: Callable[[Message], None],
    ) -> None:
        self._calls = calls
        self._job_id = job_id
        self._recorded = list(recorded)
        self._total = max(total, len(recorded))
        self._on_suspend = on_suspend
        self._names: set[str] = set()
        self._position = 0
        self._busy = False
        self.poison: str | None = None
        """Set once a replay went another way: the attempt's error (it fails for good)."""
        self.suspended = False

    async def step(self, name: str, fn: Callable[[], Any]) -> Any:
        step_name = _checked_name(name)
        if not callable(fn):
            raise _invalid(f'step "{step_name}": give a function to run')
        if step_name in self._names:
            raise _invalid(f'step "{step_name}": the name is used twice in one run of the handler')
        self._enter()
        try:
            self._names.add(step_name)
            position = self._position
            self._position += 1
            recorded = await self._at(position)
            if recorded is not None:
                self._expect(position, recorded, step_name)
                return json.loads(recorded.get("result") or "null")
            value = fn()
            if inspect.isawaitable(value):
                value = await value
            text = step_json(step_name, value)
            await self._calls.call(
                {"type": "RECORD_STEP", "index": position, "name": step_name, "result": text}
            )
            return json.loads(text)
        finally:
            self._busy = False

    async def sleep(self, duration: Any) -> None:
        sleep_ms = sleep_ms_of(duration)
        _, recorded = await self._next_recorded(SLEEP_STEP)
        if recorded is None:
            await self._suspend({"sleepMillis": sleep_ms})

    async def wait_for(self, job_id: str) -> dict[str, Any]:
        if not isinstance(job_id, str) or not 1 <= len(job_id) <= MAX_JOB_ID_LENGTH:
            raise TypeError(f"ctx.wait_for: the job id must be 1..{MAX_JOB_ID_LENGTH} characters")
        if job_id == self._job_id:
            raise _invalid("ctx.wait_for: a job cannot wait for itself")
        position, recorded = await self._next_recorded(WAIT_STEP)
        if recorded is None:
            await self._suspend({"waitForJobId": job_id})
            raise AssertionError("unreachable: a suspended handler never resumes")
        outcome = json.loads(recorded.get("result") or "{}")
        if not isinstance(outcome, dict) or outcome.get("jobId") != job_id:
            waited = outcome.get("jobId") if isinstance(outcome, dict) else None
            self._non_deterministic(
                f"position {position} waited for job {json.dumps(waited)}, "
                f"this run waits for {job_id}"
            )
        return wait_outcome(outcome)

    async def wait_for_signal(self, name: str, timeout: Any = None) -> ReceivedSignal | None:
        wait = signal_wait(name, timeout)
        position, recorded = await self._next_recorded(SIGNAL_STEP)
        if recorded is None:
            await self._suspend({"waitForSignal": wait})
            raise AssertionError("unreachable: a suspended handler never resumes")
        signal = recorded_signal(recorded.get("result"))
        if signal is not None and signal["name"] != wait["name"]:
            self._non_deterministic(
                f'position {position} took signal "{signal["name"]}", '
                f'this run waits for "{wait["name"]}"'
            )
        return signal

    async def wait_for_event(
        self, name: str, key: str | None = None, timeout: Any = None
    ) -> ReceivedEvent | None:
        wait = event_wait(name, key, timeout)
        position, recorded = await self._next_recorded(EVENT_STEP)
        if recorded is None:
            await self._suspend({"waitForEvent": wait})
            raise AssertionError("unreachable: a suspended handler never resumes")
        event = recorded_event(recorded.get("result"))
        keyed = wait.get("key")
        if event is not None and (
            event["name"] != wait["name"] or (keyed is not None and event["key"] != keyed)
        ):
            self._non_deterministic(
                f'position {position} woke on event "{event["name"]}" (key '
                f'{json.dumps(event["key"])}), this run waits for "{wait["name"]}" (key '
                f"{json.dumps(keyed)})"
            )
        return event

    async def _next_recorded(self, kind: str) -> tuple[int, Mapping[str, Any] | None]:
        """Takes the next position, and the step recorded there (checked to be a ``kind``)."""
        self._enter()
        try:
            position = self._position
            self._position += 1
            recorded = await self._at(position)
            if recorded is not None:
                self._expect(position, recorded, kind)
            return position, recorded
        finally:
            self._busy = False

    def _enter(self) -> None:
        if self.poison is not None:
            raise StepError("NON_DETERMINISTIC", self.poison)
        if self._busy:
            raise _invalid("steps run one at a time: await each step before the next")
        self._busy = True

    async def _at(self, position: int) -> Mapping[str, Any] | None:
        """The recorded step at a position, fetched when the assignment left it out."""
        while position >= len(self._recorded) and len(self._recorded) < self._total:
            reply = await self._calls.call({"type": "GET_STEPS", "fromIndex": len(self._recorded)})
            steps = reply.get("steps")
            if not isinstance(steps, list) or not steps:
                break
            self._recorded.extend(s for s in steps if isinstance(s, Mapping))
        return self._recorded[position] if position < len(self._recorded) else None

    def _expect(self, position: int, recorded: Mapping[str, Any], name: str) -> None:
        if recorded.get("name") != name:
            self._non_deterministic(
                f'step {position} was recorded as "{recorded.get("name")}", '
                f'this run calls "{name}" there'
            )

    def _non_deterministic(self, detail: str) -> None:
        self.poison = (
            f"NON_DETERMINISTIC: {detail} (the handler must call its steps in the same order "
            "every time)"
        )
        raise StepError("NON_DETERMINISTIC", self.poison)

    async def _suspend(self, suspension: Message) -> None:
        self.suspended = True
        self._on_suspend(suspension)
        # The handler waits here for good: the attempt has ended without it (its task
        # is cancelled by the runner).
        await asyncio.get_running_loop().create_future()


def enqueue_message(
    ordinal: int, task_type: str, payload: Mapping[str, Any], options: Mapping[str, Any]
) -> Message:
    """The ENQUEUE_CHILD of ``ctx.enqueue``; ``TypeError``/``ValueError`` before anything is sent.
    Its key: ``k:<key>``, or ``o:<n>`` for the n-th call without one."""
    if not isinstance(task_type, str) or not task_type:
        raise TypeError("ctx.enqueue: task_type must be a non-empty string")
    if not isinstance(payload, Mapping):
        raise TypeError("ctx.enqueue: payload must be a JSON object (a dict)")
    known = {"key", "queue", "group_key", "priority", "max_attempts", "timeout_millis"}
    unknown = sorted(set(options) - known - {"delay_ms", "run_at"})
    if unknown:
        raise TypeError(
            f"ctx.enqueue: unknown option {unknown[0]!r}; known: "
            f"{', '.join(sorted(known))}, delay_ms, run_at"
        )
    rest = dict(options)
    key = rest.pop("key", None)
    if key is not None and (not isinstance(key, str) or not 1 <= len(key) <= MAX_CHILD_KEY_LENGTH):
        raise ValueError(
            f"ctx.enqueue: key must be a string of 1..{MAX_CHILD_KEY_LENGTH} characters"
        )

    message: Message = {
        "type": "ENQUEUE_CHILD",
        "key": f"o:{ordinal}" if key is None else f"k:{key}",
        "taskType": task_type,
        "payload": dict(payload),
    }
    run_at = _run_at_millis(rest, int(time.time() * 1000))
    if run_at is not None:
        message["runAtMillis"] = run_at
    if rest.get("queue") is not None:
        message["queue"] = check_queue_name(rest["queue"])
    if rest.get("group_key") is not None:
        message["groupKey"] = _check_group_key(rest["group_key"])
    if rest.get("priority") is not None:
        if rest["priority"] not in PRIORITIES:
            raise ValueError(f"ctx.enqueue: priority must be one of {', '.join(PRIORITIES)}")
        message["priority"] = rest["priority"]
    for name, field, high in (
        ("max_attempts", "maxAttempts", MAX_ATTEMPTS_LIMIT),
        ("timeout_millis", "timeoutMillis", MAX_TASK_TIMEOUT_MS),
    ):
        value = rest.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
            raise ValueError(f"ctx.enqueue: {name} must be an integer in 1..{high}")
        message[field] = value
    return message


class AttemptDurable:
    """What ``ctx.step``, ``ctx.sleep``, ``ctx.wait_for``, ``ctx.wait_for_signal``,
    ``ctx.wait_for_event`` and ``ctx.enqueue`` of one attempt work through; each refuses
    (``UNSUPPORTED_FEATURE``) unless the coordinator offers its feature (``steps``,
    ``signals``, ``children``)."""

    def __init__(
        self,
        calls: CallPort,
        run: Mapping[str, Any],
        on_suspend: Callable[[Message], None],
    ) -> None:
        features = run.get("features")
        self.features = frozenset(features if isinstance(features, list) else [])
        recorded = run.get("steps")
        count = run.get("stepCount")
        self.calls = calls
        self.steps = AttemptSteps(
            calls,
            str(run.get("jobId")),
            list(recorded) if isinstance(recorded, list) else [],
            count if isinstance(count, int) else 0,
            on_suspend,
        )
        self._ordinal = 0

    def _need(self, feature: str, what: str) -> None:
        if feature not in self.features:
            raise StepError(
                "UNSUPPORTED_FEATURE",
                f'{what}: the coordinator does not offer it (feature "{feature}")',
            )

    async def step(self, name: str, fn: Callable[[], Any]) -> Any:
        self._need("steps", "ctx.step")
        return await self.steps.step(name, fn)

    async def sleep(self, duration: Any) -> None:
        self._need("steps", "ctx.sleep")
        await self.steps.sleep(duration)

    async def wait_for(self, job_id: str) -> dict[str, Any]:
        self._need("steps", "ctx.wait_for")
        return await self.steps.wait_for(job_id)

    async def wait_for_signal(self, name: str, timeout: Any) -> ReceivedSignal | None:
        self._need_signals("ctx.wait_for_signal")
        return await self.steps.wait_for_signal(name, timeout)

    async def wait_for_event(
        self, name: str, key: str | None, timeout: Any
    ) -> ReceivedEvent | None:
        self._need_signals("ctx.wait_for_event")
        return await self.steps.wait_for_event(name, key, timeout)

    def _need_signals(self, what: str) -> None:
        if "signals" not in self.features:
            raise StepError(
                "UNSUPPORTED_FEATURE",
                f'{what}: the coordinator does not offer signals and events (feature "signals")',
            )

    async def enqueue(
        self, task_type: str, payload: Mapping[str, Any], options: Mapping[str, Any]
    ) -> str:
        self._need("children", "ctx.enqueue")
        keyed = options.get("key") is not None
        message = enqueue_message(self._ordinal, task_type, payload, options)
        if not keyed:
            self._ordinal += 1  # counted when the call is made: the same code makes the same keys
        reply = await self.calls.call(message)
        job_id = reply.get("jobId")
        if not isinstance(job_id, str):
            raise StepError(
                "UNEXPECTED_REPLY", f"ctx.enqueue: unexpected answer {reply.get('type')}"
            )
        return job_id


def parents_of(run: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``ctx.parents``: the assignment's parents, results decoded as ``job.result()`` would."""
    parents = run.get("parents")
    if not isinstance(parents, list):
        return []
    return [
        {
            "jobId": p.get("jobId"),
            "taskType": p.get("taskType"),
            "state": p.get("state"),
            "result": decode_result(p.get("result"), p.get("resultFormat")),
            "omitted": p.get("omitted") is True,
        }
        for p in parents
        if isinstance(p, Mapping)
    ]
