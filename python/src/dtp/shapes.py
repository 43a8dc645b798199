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
    dedupKey: str | None
    dedupMode: str | None
    """``active``, ``throttle`` or ``debounce``, with a ``dedupKey``."""
    expiresAtMillis: int | None
    expired: bool | None
    """True on a job that ended ``CANCELLED`` because it expired before it started."""


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
