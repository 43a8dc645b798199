"""dtp in Python: write task handlers for dtp workers, run them with
``python -m dtp.worker --tasks tasks.py``, and submit and follow jobs with
``dtp.Client``. Standard library only.

    import dtp

    @dtp.task("text.shout")
    def shout(payload, ctx):
        return payload["text"].upper()

    with dtp.Client("localhost:7071") as client:
        print(client.submit("text.shout", {"text": "hi"}).result(timeout=30))
"""

from .client import Client, JobHandle
from .errors import (
    AuthError,
    ClientClosedError,
    DtpError,
    InvalidPayloadError,
    JobCancelledError,
    JobFailedError,
    NotLeaderError,
    RemoteError,
    SubmitRejectedError,
    TransportError,
    UnexpectedReplyError,
    UnsupportedRequestError,
    WaitTimeoutError,
)
from .tasks import NonRetryableError, TaskCancelled, TaskContext, TaskFailed, task

__version__ = "0.1.0"

__all__ = [
    "AuthError",
    "Client",
    "ClientClosedError",
    "DtpError",
    "InvalidPayloadError",
    "JobCancelledError",
    "JobFailedError",
    "JobHandle",
    "NonRetryableError",
    "NotLeaderError",
    "RemoteError",
    "SubmitRejectedError",
    "TaskCancelled",
    "TaskContext",
    "TaskFailed",
    "TransportError",
    "UnexpectedReplyError",
    "UnsupportedRequestError",
    "WaitTimeoutError",
    "__version__",
    "task",
]
