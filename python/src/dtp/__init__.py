"""dtp in Python: write task handlers for dtp workers, run them with
``python -m dtp.worker --tasks tasks.py``, and submit and follow jobs with
``dtp.Client`` (or ``dtp.AsyncClient`` on an event loop). Standard library only.

    import dtp

    @dtp.task("text.shout")
    def shout(payload, ctx):
        return payload["text"].upper()

    with dtp.Client("localhost:7071") as client:
        print(shout.submit({"text": "hi"}, client=client).result(timeout=30))
"""

from .admin import Queues, Schedules
from .aio import AsyncClient, AsyncEventStream, AsyncJobHandle
from .client import Client, JobHandle, default_client, set_default_client
from .errors import (
    AuthError,
    ClientClosedError,
    DtpError,
    EventsUnsupportedError,
    FeatureUnsupportedError,
    InvalidPayloadError,
    JobCancelledError,
    JobFailedError,
    NotLeaderError,
    RemoteError,
    SubmitRejectedError,
    TransportError,
    UnexpectedReplyError,
    UnknownJobError,
    UnknownQueueError,
    UnknownScheduleError,
    UnsupportedFeatureError,
    UnsupportedRequestError,
    WaitTimeoutError,
)
from .events import EventStream
from .shapes import (
    BatchSubmission,
    Features,
    HeldGroup,
    JobSnapshot,
    ParentJob,
    PublishResult,
    QueueInfo,
    RateLimit,
    ReceivedEvent,
    ReceivedSignal,
    RerunResult,
    ScheduleSnapshot,
    SignalResult,
    TriggerSnapshot,
    WaitingFor,
    WaitOutcome,
    WatchEvent,
)
from .signals import Triggers
from .tasks import (
    NonRetryableError,
    RateLimited,
    Task,
    TaskCancelled,
    TaskContext,
    TaskFailed,
    task,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "AsyncEventStream",
    "AsyncJobHandle",
    "AuthError",
    "BatchSubmission",
    "Client",
    "ClientClosedError",
    "DtpError",
    "EventStream",
    "EventsUnsupportedError",
    "FeatureUnsupportedError",
    "Features",
    "HeldGroup",
    "InvalidPayloadError",
    "JobCancelledError",
    "JobFailedError",
    "JobHandle",
    "JobSnapshot",
    "NonRetryableError",
    "NotLeaderError",
    "ParentJob",
    "PublishResult",
    "QueueInfo",
    "Queues",
    "RateLimit",
    "RateLimited",
    "ReceivedEvent",
    "ReceivedSignal",
    "RemoteError",
    "RerunResult",
    "ScheduleSnapshot",
    "Schedules",
    "SignalResult",
    "SubmitRejectedError",
    "Task",
    "TaskCancelled",
    "TaskContext",
    "TaskFailed",
    "TransportError",
    "TriggerSnapshot",
    "Triggers",
    "UnexpectedReplyError",
    "UnknownJobError",
    "UnknownQueueError",
    "UnknownScheduleError",
    "UnsupportedFeatureError",
    "UnsupportedRequestError",
    "WaitOutcome",
    "WaitTimeoutError",
    "WaitingFor",
    "WatchEvent",
    "__version__",
    "default_client",
    "set_default_client",
    "task",
]
