"""The shapes of what the client and ``ctx`` hand back, as ``TypedDict`` s.

They are plain ``dict`` s at run time, keyed by the wire names the protocol
uses (``jobId``, ``atMillis``), exactly as ``client.sh ... --json`` prints
them; the types only tell a type checker (and a reader) which keys to expect.
A coordinator may add keys; a key marked optional here may be absent.
"""

from __future__ import annotations

from typing import Any, TypedDict

JsonValue = Any
"""Any value JSON carries (None, bool, int, float, str, list, dict with str keys)."""


class Progress(TypedDict):
    fraction: float
    message: str | None
    atMillis: int


class WaitingFor(TypedDict, total=False):
    """What a ``WAITING`` job's handler waits for (a snapshot's ``waitingFor``): one of
    ``jobId`` (``ctx.wait_for``), ``signal`` (``ctx.wait_for_signal``) or ``event``
    (``ctx.wait_for_event``, with the ``key`` it must carry, None for any), and until
    when (``untilMillis``, None for no timeout)."""

    jobId: str | None
    signal: str | None
    event: str | None
    key: str | None
    untilMillis: int | None


class JobSnapshot(TypedDict, total=False):
    """A job as the coordinator shows it (``status``, ``wait``, ``list``, events).
    The first keys are always there; the others when the job has them."""

    jobId: str
    taskType: str
    state: str
    attempts: int
    maxAttempts: int
    workerId: str | None
    result: str | None
    error: str | None
    createdAtMillis: int
    updatedAtMillis: int
    priority: str
    startedAtMillis: int | None
    finishedAtMillis: int | None
    resultFormat: str | None
    timeoutMillis: int | None
    idempotencyKey: str | None
    queue: str | None
    groupKey: str | None
    dependsOn: list[str] | None
    runAtMillis: int | None
    scheduleName: str | None
    progress: Progress | None
    parentJobId: str | None
    children: list[str] | None
    steps: list[dict[str, Any]] | None
    suspensions: int | None
    requeues: int | None
    rateLimited: int | None
    """Attempts its handler ended rate limited (not counted toward ``maxAttempts``)."""
    dedupKey: str | None
    dedupMode: str | None
    """``active``, ``throttle`` or ``debounce``, with a ``dedupKey``."""
    expiresAtMillis: int | None
    expired: bool | None
    """True on a job that ended ``CANCELLED`` because it expired before it started."""
    waitingFor: WaitingFor | None
    """What the job's handler waits for while the job is ``WAITING`` on a wait of its own."""
    signalsHeld: int | None
    """Signals sent to the job that no ``ctx.wait_for_signal`` has taken yet (absent: none)."""


class WatchEvent(TypedDict):
    """One item of ``client.watch`` and ``client.events``, as ``watch --json`` prints it:
    ``event`` is ``current`` (the job when watching began), ``state`` (a new job, state
    or attempt) or ``progress``."""

    event: str
    atMillis: int
    job: JobSnapshot


class RateLimit(TypedDict):
    max: int
    intervalMillis: int


class HeldGroup(TypedDict):
    """A group of a queue that a handler's ``dtp.RateLimited(scope="group")`` holds back."""

    groupKey: str | None
    untilMillis: int


class QueueInfo(TypedDict, total=False):
    """A queue as ``queue list --json`` shows it (``created``: this change made it)."""

    name: str
    paused: bool
    concurrency: int | None
    rateLimit: RateLimit | None
    groupConcurrency: int | None
    groupRateLimit: RateLimit | None
    counts: dict[str, int]
    running: int | None
    groups: list[dict[str, Any]] | None
    rateLimitedUntilMillis: int | None
    """Until when a handler's ``dtp.RateLimited(scope="queue")`` holds the queue back."""
    heldGroups: list[HeldGroup] | None
    created: bool


class ScheduleSnapshot(TypedDict, total=False):
    """A schedule as ``schedule list --json`` shows it (``recentJobs`` from ``get`` only)."""

    name: str
    taskType: str
    cron: str | None
    everyMillis: int | None
    timezone: str | None
    payload: dict[str, Any]
    paused: bool
    overlap: str
    catchUp: str
    nextRunAtMillis: int | None
    lastRunAtMillis: int | None
    lastJobId: str | None
    maxAttempts: int | None
    priority: str | None
    timeoutMillis: int | None
    queue: str
    recentJobs: list[dict[str, Any]]


class BatchSubmission(TypedDict):
    """What ``client.submit_batch`` did, per job in the order given: its id, whether its
    ``dedup_key`` named an existing job (nothing was created for it), and whether that
    job was debounced (its payload and run time replaced)."""

    jobIds: list[str]
    deduplicated: list[bool]
    replaced: list[bool]


class RerunResult(TypedDict):
    """What ``client.rerun`` did: how many FAILED jobs were queued again, their ids
    (newest first), and whether more matched (call again for those)."""

    rerun: int
    jobIds: list[str]
    more: bool


class Features(TypedDict):
    """What the coordinator was found to understand (each probed once per address)."""

    waitJob: bool
    time: bool
    flows: bool
    queues: bool
    events: bool
    signals: bool


class ParentJob(TypedDict):
    """One of ``ctx.parents``: a parent of the job, its result decoded as
    ``job.result()`` would (None when it has none, or when ``omitted``)."""

    jobId: str
    taskType: str
    state: str
    result: JsonValue
    omitted: bool


class WaitOutcome(TypedDict):
    """What ``await ctx.wait_for(job_id)`` returns: how that job ended (``state`` None
    when no such job is known)."""

    jobId: str
    state: str | None
    result: JsonValue
    error: str | None
    omitted: bool


class ReceivedSignal(TypedDict):
    """What ``await ctx.wait_for_signal(name)`` returns: the signal it took (sent with
    ``client.signal``), and when the coordinator stored it."""

    name: str
    payload: JsonValue
    atMillis: int


class ReceivedEvent(TypedDict):
    """What ``await ctx.wait_for_event(name)`` returns: the event that woke it (published
    with ``client.publish``), its ``key`` (None when published without one), its id, and
    when the coordinator stored it."""

    name: str
    payload: JsonValue
    key: str | None
    eventId: str
    atMillis: int


class SignalResult(TypedDict):
    """What ``client.signal`` returns once the signal is durable: whether a wait of the job
    took it at once (``resumed``: the job was waiting for it), and how many signals the job
    holds that no wait has taken yet."""

    jobId: str
    name: str
    resumed: bool
    signalsHeld: int


class PublishResult(TypedDict):
    """What ``client.publish`` returns once the event is durable: its id, the jobs its
    triggers created (in trigger-name order), how many waiting jobs it woke, and whether
    the id was known (``duplicate``: nothing was done again, these are the first reply's)."""

    eventId: str
    jobIds: list[str]
    resumed: int
    duplicate: bool


class TriggerSnapshot(TypedDict):
    """A trigger as ``trigger list --json`` shows it: each event named ``event`` creates
    one job of ``taskType`` in ``queue`` whose payload is the event's."""

    name: str
    event: str
    taskType: str
    queue: str
    priority: str | None
    maxAttempts: int | None
    createdAtMillis: int
    updatedAtMillis: int
