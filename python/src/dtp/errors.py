"""Errors of the client. Every one is a ``DtpError`` with a stable ``code``:

- ``RemoteError``: the coordinator answered ``ERROR`` (``UNKNOWN_JOB``,
  ``INVALID_PAYLOAD``, ``INVALID_TASK_TYPE``, ``IDEMPOTENCY_CONFLICT``, ...).
- ``SubmitRejectedError``: admission control refused a submission; nothing
  was created and it may be sent again later.
- ``TransportError``: no connection (``CONNECT_FAILED``, ``TLS_FAILED``) or
  it broke with a request in flight (``CONNECTION_LOST``: its outcome is
  unknown).
- ``AuthError``: the token was refused (``UNAUTHENTICATED``) or the
  coordinator does not know authentication (``AUTH_UNSUPPORTED``).
- ``WaitTimeoutError`` (also a ``TimeoutError``): a wait ended first.
- ``InvalidPayloadError``: the payload failed the schema given to ``submit``;
  nothing was sent.
- ``JobFailedError`` / ``JobCancelledError``: what ``result()`` raises for a
  job that ended FAILED / CANCELLED.
- ``UnknownJobError`` (a ``RemoteError``, code ``UNKNOWN_JOB``): the job named
  does not exist there; ``UnknownScheduleError`` and ``UnknownQueueError``
  likewise for a schedule or a queue.
- ``UnsupportedFeatureError`` (code ``UNSUPPORTED_FEATURE``): the coordinator
  predates what was asked; ``UnsupportedRequestError``,
  ``FeatureUnsupportedError`` and ``EventsUnsupportedError`` are its kinds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .protocol import JobSnapshot, error_code, text_of


class DtpError(Exception):
    """Base of every error of this package; ``code`` is stable, the message is for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class RemoteError(DtpError):
    """The coordinator answered ``ERROR``: do not send the request again as it is."""

    def __init__(self, reply: Mapping[str, Any]) -> None:
        super().__init__(error_code(reply), text_of(reply, "message"))
        index = reply.get("index")
        #: For a refused ``submit_many``: the 0-based index of the job at fault, else None.
        self.index: int | None = index if isinstance(index, int) else None


class UnsupportedFeatureError(DtpError):
    """The coordinator does not offer what was asked (it predates it); nothing was done."""

    def __init__(self, what: str, answer: str | None = None) -> None:
        detail = f" ({answer})" if answer else ""
        super().__init__("UNSUPPORTED_FEATURE", f"this coordinator does not support {what}{detail}")


class UnsupportedRequestError(UnsupportedFeatureError):
    """The coordinator does not understand a request of an extension (it predates it)."""

    def __init__(self, what: str, answer: str) -> None:
        super().__init__(what, answer)


class FeatureUnsupportedError(UnsupportedFeatureError):
    """A named feature (``flows``, ``queues``, ``schedules``) the coordinator does not offer."""

    def __init__(self, feature: str, answer: str | None = None) -> None:
        super().__init__(feature, answer)
        self.feature = feature


class EventsUnsupportedError(UnsupportedFeatureError):
    """The coordinator has no job events (``watch``, ``events``)."""

    def __init__(self) -> None:
        super().__init__("job events (SUBSCRIBE_JOBS)")


class UnknownJobError(RemoteError):
    """``UNKNOWN_JOB``: no job of that id."""


class UnknownScheduleError(RemoteError):
    """``UNKNOWN_SCHEDULE``: no schedule of that name."""


class UnknownQueueError(RemoteError):
    """``UNKNOWN_QUEUE``: no queue of that name (a resume, or a near miss of one that exists)."""


_BY_CODE: dict[str, type[RemoteError]] = {
    "UNKNOWN_JOB": UnknownJobError,
    "UNKNOWN_SCHEDULE": UnknownScheduleError,
    "UNKNOWN_QUEUE": UnknownQueueError,
}


def remote_error(reply: Mapping[str, Any]) -> RemoteError:
    """The ``RemoteError`` of an ``ERROR`` reply, of the subclass its code has, if any."""
    kind = _BY_CODE.get(error_code(reply), RemoteError)
    return kind(reply)


class NotLeaderError(RemoteError):
    """A standby answered ``NOT_LEADER``; ``leader`` names the leader when it knows."""

    def __init__(self, reply: Mapping[str, Any]) -> None:
        super().__init__(reply)
        leader = reply.get("leader")
        self.leader: str | None = leader if isinstance(leader, str) else None


class SubmitRejectedError(DtpError):
    """Admission control refused the submission; no job was created."""

    def __init__(self, reply: Mapping[str, Any]) -> None:
        reason = text_of(reply, "reason", "submission rejected")
        super().__init__("SUBMIT_REJECTED", reason)
        self.reason = reason
        self.active_count = reply.get("activeCount")
        self.limit = reply.get("limit")
        self.retryable = reply.get("retryable") is True


class TransportError(DtpError):
    """``CONNECT_FAILED``, ``TLS_FAILED`` or ``CONNECTION_LOST`` (the outcome is unknown)."""


class AuthError(DtpError):
    """``UNAUTHENTICATED`` (token refused) or ``AUTH_UNSUPPORTED`` (no authentication there)."""


class UnexpectedReplyError(DtpError):
    def __init__(self, request: str, reply: str) -> None:
        super().__init__("UNEXPECTED_REPLY", f"unexpected reply {reply} to {request}")


class ClientClosedError(DtpError):
    def __init__(self) -> None:
        super().__init__("CLIENT_CLOSED", "the client is closed")


class InvalidPayloadError(DtpError):
    """The payload failed the schema on this side; nothing was sent."""

    def __init__(self, detail: str) -> None:
        super().__init__("INVALID_PAYLOAD", f"Invalid payload: {detail}")


class WaitTimeoutError(DtpError, TimeoutError):
    """A wait ended before the job was terminal; ``job`` is its last snapshot."""

    def __init__(self, job: JobSnapshot, timeout: float | None) -> None:
        super().__init__(
            "WAIT_TIMEOUT",
            f"timed out after {timeout} s waiting for job {job.get('jobId')} "
            f"(state {job.get('state')})",
        )
        self.job = job
        self.timeout = timeout


class JobFailedError(DtpError):
    """The job ended FAILED; ``job_error`` is the error of its last attempt."""

    def __init__(self, job: JobSnapshot) -> None:
        error = job.get("error")
        super().__init__(
            "JOB_FAILED", f"job {job.get('jobId')} failed: {error or 'no error recorded'}"
        )
        self.job = job
        self.job_error: str | None = error if isinstance(error, str) else None


class JobCancelledError(DtpError):
    """The job ended CANCELLED."""

    def __init__(self, job: JobSnapshot) -> None:
        super().__init__("JOB_CANCELLED", f"job {job.get('jobId')} was cancelled")
        self.job = job
