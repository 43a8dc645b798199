"""Signals, events and triggers: ``client.signal``, ``client.publish`` and
``client.triggers``.

    client.signal(job_id, "approved", {"by": "ana"})     # to one job
    client.publish("order.paid", {"order": 7}, key="7")  # to every listener
    client.triggers.set("bill", event="order.paid", task_type="billing.charge")

A signal goes to one job, which holds it until a ``ctx.wait_for_signal`` of
that name takes it; an event wakes every job waiting for it
(``ctx.wait_for_event``) and creates one job per trigger of its name, in the
commit that stores it. Each call returns once the coordinator has it
durably.

The requests are extensions (``SIGNAL_JOB``, ``PUBLISH_EVENT``,
``SET_TRIGGER``, ``LIST_TRIGGERS``, ``DELETE_TRIGGER``), sent only when
called: a coordinator that does not understand them answers so, and the call
raises ``FeatureUnsupportedError`` (feature ``signals``). What can be checked
here is checked before anything is sent (a name as a queue's, a payload of at
most 256 KiB of JSON, a key or event id of 1..256 characters): a
``TypeError`` or ``ValueError``. The coordinator checks everything again.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any, cast

from .errors import FeatureUnsupportedError, UnexpectedReplyError, remote_error
from .framing import Message, encode_json
from .protocol import MAX_ATTEMPTS_LIMIT, PRIORITIES, is_not_understood, text_of
from .shapes import PublishResult, SignalResult, TriggerSnapshot
from .submission import check_queue_name

if TYPE_CHECKING:
    from .client import Client

MAX_SIGNAL_PAYLOAD_BYTES = 256 * 1024
"""Largest signal or event payload, in bytes of its JSON text (UTF-8)."""
MAX_EVENT_ID_LENGTH = 256
"""Longest event id or event key, in characters."""
MAX_JOB_ID_LENGTH = 200


def check_payload(payload: Any) -> Any:
    """A signal's or event's payload: any JSON value of at most 256 KiB of JSON text;
    ``TypeError`` for what JSON cannot carry, ``ValueError`` for a larger one."""
    try:
        text = encode_json(payload)
    except (TypeError, ValueError) as err:
        raise TypeError(f"payload is not JSON: {err}") from None
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_SIGNAL_PAYLOAD_BYTES:
        raise ValueError(
            f"payload is {size} bytes as JSON; a signal or an event may carry at most "
            f"{MAX_SIGNAL_PAYLOAD_BYTES} (256 KiB)"
        )
    return payload


def check_event_id(value: Any, what: str) -> str:
    """An event key or event id: 1..256 characters."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    if not 1 <= len(value) <= MAX_EVENT_ID_LENGTH:
        raise ValueError(f"{what} must be 1..{MAX_EVENT_ID_LENGTH} characters, got {len(value)}")
    return value


def check_name(value: Any, what: str) -> str:
    """A signal, event or trigger name: as a queue's."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    return check_queue_name(value, what)


def signal_message(job_id: str, name: str, payload: Any) -> Message:
    """The ``SIGNAL_JOB`` of ``client.signal`` (checked first)."""
    if not isinstance(job_id, str) or not 1 <= len(job_id) <= MAX_JOB_ID_LENGTH:
        raise TypeError(f"job_id must be a string of 1..{MAX_JOB_ID_LENGTH} characters")
    return {
        "type": "SIGNAL_JOB",
        "jobId": job_id,
        "name": check_name(name, "the signal name"),
        "payload": check_payload(payload),
    }


def publish_message(
    name: str, payload: Any, key: str | None = None, event_id: str | None = None
) -> Message:
    """The ``PUBLISH_EVENT`` of ``client.publish`` (checked first); unset options left out."""
    message: Message = {
        "type": "PUBLISH_EVENT",
        "name": check_name(name, "the event name"),
        "payload": check_payload(payload),
    }
    if key is not None:
        message["key"] = check_event_id(key, "key")
    if event_id is not None:
        message["eventId"] = check_event_id(event_id, "event_id")
    return message


def set_trigger_message(
    name: str,
    event: str,
    task_type: str,
    queue: str | None = None,
    priority: str | None = None,
    max_attempts: int | None = None,
) -> Message:
    """The ``SET_TRIGGER`` of ``client.triggers.set`` (checked first); unset options left out."""
    if not isinstance(task_type, str) or not task_type:
        raise TypeError("task_type must be a non-empty string")
    trigger: Message = {
        "name": check_name(name, "the trigger name"),
        "event": check_name(event, "event"),
        "taskType": task_type,
    }
    if queue is not None:
        trigger["queue"] = check_queue_name(queue)
    if priority is not None:
        if priority not in PRIORITIES:
            raise ValueError(f"priority must be one of {', '.join(PRIORITIES)}, got {priority!r}")
        trigger["priority"] = priority
    if max_attempts is not None:
        if (
            isinstance(max_attempts, bool)
            or not isinstance(max_attempts, int)
            or not 1 <= max_attempts <= MAX_ATTEMPTS_LIMIT
        ):
            raise ValueError(f"max_attempts must be an integer 1..{MAX_ATTEMPTS_LIMIT}")
        trigger["maxAttempts"] = max_attempts
    return {"type": "SET_TRIGGER", "trigger": trigger}


def expect(reply: Message, request: str, kind: str) -> Message:
    """The reply when it is a ``kind``; a not-understood ``ERROR`` is
    ``FeatureUnsupportedError`` (``signals``), another ``ERROR`` its ``RemoteError``
    (``UnknownJobError`` for an unknown job)."""
    if reply["type"] == kind:
        return reply
    if reply["type"] == "ERROR":
        if is_not_understood(reply):
            raise FeatureUnsupportedError("signals", text_of(reply, "message"))
        raise remote_error(reply)
    raise UnexpectedReplyError(request, str(reply["type"]))


def signal_result(reply: Message) -> SignalResult:
    held = reply.get("signalsHeld")
    return {
        "jobId": str(reply.get("jobId")),
        "name": str(reply.get("name")),
        "resumed": reply.get("resumed") is True,
        "signalsHeld": held if isinstance(held, int) else 0,
    }


def publish_result(reply: Message) -> PublishResult:
    ids = reply.get("jobIds")
    resumed = reply.get("resumed")
    return {
        "eventId": str(reply.get("eventId")),
        "jobIds": [str(job_id) for job_id in ids] if isinstance(ids, builtins.list) else [],
        "resumed": resumed if isinstance(resumed, int) else 0,
        "duplicate": reply.get("duplicate") is True,
    }


class Triggers:
    """Triggers: each event of a name creates one job of a task type, whose payload is
    the event's (``set``, ``list``, ``delete``)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def _send(self, message: Message, kind: str) -> Message:
        reply = self._client._extension_request(message)
        return expect(reply, str(message["type"]), kind)

    def set(
        self,
        name: str,
        *,
        event: str,
        task_type: str,
        queue: str | None = None,
        priority: str | None = None,
        max_attempts: int | None = None,
    ) -> TriggerSnapshot:
        """Creates the trigger ``name`` or replaces its definition; returns it once durable.
        From then on each event named ``event`` creates one job of ``task_type`` (in
        ``queue``, default ``default``; ``priority`` and ``max_attempts`` as ``submit``'s)
        whose payload is the event's (one that is not a JSON object reaches the job as
        ``{"value": payload}``), in the commit that stores the event."""
        message = set_trigger_message(name, event, task_type, queue, priority, max_attempts)
        return cast(TriggerSnapshot, self._send(message, "TRIGGER_INFO")["trigger"])

    def list(self) -> builtins.list[TriggerSnapshot]:
        """Every trigger, sorted by name."""
        reply = self._send({"type": "LIST_TRIGGERS"}, "TRIGGER_LIST")
        triggers = reply.get("triggers")
        return cast(
            "builtins.list[TriggerSnapshot]",
            builtins.list(triggers) if isinstance(triggers, builtins.list) else [],
        )

    def delete(self, name: str) -> bool:
        """Deletes the trigger; False when there was none of that name. The jobs it made
        stay."""
        message: Message = {"type": "DELETE_TRIGGER", "name": check_name(name, "the trigger name")}
        return self._send(message, "TRIGGER_DELETED").get("deleted") is True
