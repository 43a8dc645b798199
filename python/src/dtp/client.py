"""The synchronous client of the client port.

    with dtp.Client("localhost:7071") as client:
        job = client.submit("text.shout", {"text": "hi"}, priority="HIGH")
        print(job.result(timeout=30))          # the handler's value
        for snapshot in client.list(state="FAILED"):
            print(snapshot["jobId"], snapshot["error"])
        refs = client.submit_flow({"jobs": [...]})        # {ref: job_id}
        for event in client.watch(job.job_id):            # pushed by the coordinator
            print(event["event"], event["job"]["state"])

What a submission may say is checked in submission.py; ``client.queues`` and
``client.schedules`` are in admin.py, ``watch`` and ``events`` in events.py.

One request is on the wire at a time (a lock makes a client safe to share
between threads; use one client per thread to run requests side by side). The
connection is made at the first request and made again after it broke.

Extensions are used only where the coordinator understands them, found out as
the TypeScript client does: before its first ``WAIT_JOB`` the client probes,
on a connection of its own, with a ``WAIT_JOB`` for a job that cannot exist;
only a not-understood answer (a close, or an ``ERROR`` saying ``Malformed
request``, ``Undecodable`` or ``Unsupported request``) means "unsupported",
and then waiting polls ``GET_JOB_STATUS``. The answer is remembered per
coordinator address for the life of the process. Listing needs no probe: a v1
coordinator ignores ``limit``, ``state``, ``taskType`` and ``cursor``, which
shows in its reply, and the client then pages that reply itself.

With several coordinators (``"h1:7071,h2:7071"``) the client follows the
leader: a ``NOT_LEADER`` answer is followed to the leader it names (the
request was not processed, so any request is sent again), and a connection
that broke with a request in flight is dialled again and the request resent
when that is safe: reads, waits, cancels, and submissions with an idempotency
key (and events with an event id; never a signal).
"""

from __future__ import annotations

import builtins
import datetime
import math
import os
import random
import ssl
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import (
    Any,
    Callable,
    cast,
)

from .addresses import HostPort, LeaderRing, parse_address_list
from .admin import Queues, Schedules
from .connection import Connection
from .errors import (
    ClientClosedError,
    DtpError,
    FeatureUnsupportedError,
    InvalidPayloadError,
    JobCancelledError,
    JobFailedError,
    NotLeaderError,
    SubmitRejectedError,
    TransportError,
    UnexpectedReplyError,
    UnsupportedRequestError,
    WaitTimeoutError,
    remote_error,
)
from .events import EventStream, GapSink
from .framing import Message, decode_json
from .protocol import (
    JOB_STATES,
    KNOWN_STATES,
    MAX_ATTEMPTS_LIMIT,
    NOT_LEADER,
    TERMINAL_STATES,
    JobSnapshot,
    get_str_list,
    is_not_understood,
    text_of,
)
from .security import client_tls
from .shapes import BatchSubmission, Features, PublishResult, RerunResult, SignalResult
from .signals import (
    Triggers,
    expect,
    publish_message,
    publish_result,
    signal_message,
    signal_result,
)
from .submission import (
    MAX_BATCH_JOBS,
    MAX_FLOW_JOBS,
    _flow_job,
    _int_in,
    _job_message,
    _names_queue,
    _unknown_option,
    check_queue_name,
)

MAX_RERUN_LIMIT = 10_000
MAX_FILTER_VALUE_LENGTH = 256

DEFAULT_CLIENT_PORT = 7071
WAIT_SLICE_MS = 60_000
"""Longest hold asked of the coordinator by one ``WAIT_JOB``; longer waits send several."""
FIRST_POLL_SECONDS = 0.05
LONGEST_POLL_SECONDS = 0.5
_FIRST_PAUSE = 0.05
_LONGEST_PAUSE = 1.0
_LOCAL_CURSOR = "dtp-local:"

# ------------------------------------------------ what coordinators understand

_features_lock = threading.Lock()
_wait_job_by_address: dict[str, bool] = {}
_probed_by_address: dict[tuple[str, str], bool] = {}
_PROBES: dict[str, Callable[[], Message]] = {
    "time": lambda: {"type": "LIST_SCHEDULES"},
    "flows": lambda: {"type": "SUBMIT_FLOW", "jobs": []},
    "queues": lambda: {"type": "LIST_QUEUES"},
    "events": lambda: {
        "type": "SUBSCRIBE_JOBS",
        "filter": {"jobId": f"dtp-probe-{uuid.uuid4()}"},
    },
    # Understood: UNKNOWN_JOB (no job has that id), so nothing is held anywhere.
    "signals": lambda: {
        "type": "SIGNAL_JOB",
        "jobId": f"dtp-probe-{uuid.uuid4()}",
        "name": "probe",
        "payload": None,
    },
}
"""The request that tells whether a coordinator understands a feature (it changes nothing)."""


def _remembered(address: str) -> bool | None:
    with _features_lock:
        return _wait_job_by_address.get(address)


def _remember(address: str, wait_job: bool) -> None:
    with _features_lock:
        _wait_job_by_address[address] = wait_job


def settled_value(job: JobSnapshot) -> Any:
    """The value of a terminal job, or ``JobFailedError`` / ``JobCancelledError``."""
    state = job.get("state")
    if state == "COMPLETED":
        result = job.get("result")
        if job.get("resultFormat") == "json" and isinstance(result, str):
            return decode_json(result, allow_nan=True)
        return result
    if state == "FAILED":
        raise JobFailedError(job)
    if state == "CANCELLED":
        raise JobCancelledError(job)
    raise ValueError(f"job {job.get('jobId')} is not terminal ({state})")


class JobHandle:
    """A submitted job: its id, its first snapshot, and ways to follow it."""

    def __init__(
        self,
        client: Client,
        snapshot: JobSnapshot,
        serving_workers: int | None,
        queue_paused: bool = False,
        deduplicated: bool = False,
        replaced: bool = False,
    ) -> None:
        self._client = client
        self.job_id: str = snapshot["jobId"]
        self.snapshot = snapshot
        self.serving_workers = serving_workers
        """Live workers that declared the job's type when it was accepted (None: not said)."""
        self.queue_paused = queue_paused
        """The job's queue was paused when it was accepted (it waits for a resume)."""
        self.deduplicated = deduplicated
        """Nothing was created: ``job_id`` is the job that holds the submission's ``dedup_key``."""
        self.replaced = replaced
        """That job was debounced: its payload and run time are the submission's now."""

    def result(self, timeout: float | None = None) -> Any:
        """Waits for the end; the handler's value, or ``JobFailedError`` / ``JobCancelledError``."""
        return settled_value(self.wait(timeout))

    def wait(self, timeout: float | None = None) -> JobSnapshot:
        """Waits for the end; the final snapshot whatever the state (``WaitTimeoutError`` first)."""
        return self._client.wait(self.job_id, timeout)

    def status(self) -> JobSnapshot:
        return self._client.status(self.job_id)

    def cancel(self) -> dict[str, Any]:
        return self._client.cancel(self.job_id)

    def __repr__(self) -> str:
        return f"JobHandle({self.job_id!r}, state={self.snapshot.get('state')!r})"


def _default_address() -> str:
    host = os.environ.get("DTP_HOST", "").strip() or "localhost"
    port = os.environ.get("DTP_PORT", "").strip()
    return f"{host}:{port}" if port and "," not in host and ":" not in host else host


def _is_safe_to_repeat(message: Mapping[str, Any]) -> bool:
    if message["type"] in ("AUTH", "SIGNAL_JOB"):
        return False  # a signal sent twice is held twice
    if message["type"] == "PUBLISH_EVENT":
        # An event id makes a second publish do nothing; without one it would be two events.
        return bool(message.get("eventId"))
    if message["type"] == "SUBMIT_JOBS":
        # A batch is safe to send again only when every job of it has a key.
        jobs = message.get("jobs")
        return isinstance(jobs, list) and all(
            isinstance(job, Mapping) and bool(job.get("idempotencyKey")) for job in jobs
        )
    if message["type"] != "SUBMIT_JOB":
        return True
    return bool(message.get("idempotencyKey"))


class Client:
    """A client of one coordinator (or of several sharing a database, one leading).

    ``address`` is ``"host:port"`` or ``"h1[:p1],h2[:p2]"`` (default: ``DTP_HOST`` and
    ``DTP_PORT`` from the environment, else ``localhost:7071``). ``token`` is sent in
    ``AUTH`` first on every connection. TLS: ``tls=True`` verifies the coordinator
    against the system CAs, ``tls_ca`` against that CA file; ``tls_cert``/``tls_key``
    present a client certificate; ``ssl_context`` replaces all of them. Times are
    in seconds.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        token: str | None = None,
        tls: bool = False,
        tls_ca: str | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        connect_timeout: float = 5.0,
        request_timeout: float = 60.0,
        follow_timeout: float = 30.0,
    ) -> None:
        addresses = parse_address_list(
            address if address is not None else _default_address(), DEFAULT_CLIENT_PORT
        )
        self._ring = LeaderRing(addresses)
        self._dialed: HostPort = addresses[0]
        self._port = DEFAULT_CLIENT_PORT
        if ssl_context is None and (tls or tls_ca or tls_cert or tls_key):
            ssl_context = client_tls(tls_ca, tls_cert, tls_key)
        self._tls = ssl_context
        if token is not None and not token.strip():
            raise ValueError("token must not be blank")
        self._token = token
        self._connect_timeout = connect_timeout
        self._request_timeout = request_timeout
        self._follow_timeout = follow_timeout
        self._lock = threading.RLock()
        self._conn: Connection | None = None
        self._closed = False
        self._streams: set[EventStream] = set()
        self._streams_lock = threading.Lock()  # not the request lock: a close never waits
        self.queues = Queues(self)
        """The named queues: ``list``, ``get``, ``pause``, ``resume``, ``set``."""
        self.schedules = Schedules(self)
        """Recurring schedules: ``set``, ``list``, ``get``, ``pause``, ``resume``, ``delete``,
        ``trigger``."""
        self.triggers = Triggers(self)
        """Triggers, which turn each event of a name into a job: ``set``, ``list``,
        ``delete``."""

    # ------------------------------------------------------------- lifecycle

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connection; later requests raise ``ClientClosedError``. Idempotent."""
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        with self._streams_lock:
            streams, self._streams = list(self._streams), set()
        for stream in streams:
            stream.close()

    @property
    def address(self) -> str:
        """``host:port`` of the coordinator dialled last (the leader, once one answered)."""
        return str(self._dialed)

    # -------------------------------------------------------------- requests

    def submit(self, task_type: str, payload: Mapping[str, Any], **options: Any) -> JobHandle:
        """Submits a job and returns its handle.

        Options: ``priority`` (``"HIGH"``, ``"NORMAL"``, ``"LOW"``), ``idempotency_key``,
        ``max_attempts`` (1..1000), ``timeout_millis`` (the job's deadline per attempt),
        ``delay_ms`` or ``run_at`` (an aware ``datetime`` or epoch ms, at most 366 days
        ahead: the job is ``SCHEDULED`` until then; ``UnsupportedRequestError`` from a
        coordinator without delayed jobs, nothing sent),
        ``queue`` (a named queue; default ``default``), ``group_key`` (a tenant or customer
        within the queue, 1..128 characters), ``depends_on`` (ids of existing jobs: the job
        is ``WAITING`` until they all completed), ``on_parent_failure`` (``"cancel"``, the
        default, or ``"run"``: what a parent that failed or was cancelled does to it),
        ``schema`` (a callable that raises on an invalid payload: ``InvalidPayloadError``,
        nothing sent), ``retries`` (resend a submission that admission control refused, or
        one with a key whose connection broke; default 0).

        Deduplication and expiry: ``dedup_key`` (1..256 characters, scoped to the queue;
        separate from idempotency keys), ``dedup_mode`` (``"active"``, the default: nothing
        is created while the key's job has not ended; ``"throttle"``: nothing is created for
        ``dedup_window_ms`` after the key's job was; ``"debounce"``, which needs a delay: the
        key's job, while it has not started, takes this payload and run time), and
        ``expires_at`` (an aware ``datetime`` or epoch ms) or ``expire_after_ms``: a job
        that has not started by then never starts (it ends ``CANCELLED``, ``expired``). The
        handle's ``deduplicated`` and ``replaced`` say what a key did.

        An unknown option is a ``TypeError``, a bad value a ``ValueError`` or ``TypeError``,
        before anything is sent. Raises ``SubmitRejectedError``, ``RemoteError``
        (``INVALID_TASK_TYPE``, ``INVALID_PAYLOAD``, ``IDEMPOTENCY_CONFLICT``,
        ``UnknownJobError`` for a parent that does not exist), ``UnsupportedFeatureError``
        (nothing sent: the coordinator would ignore an option), ``TransportError``.
        """
        if not isinstance(task_type, str) or not task_type:
            raise TypeError("task_type must be a non-empty string")
        if not isinstance(payload, Mapping):
            raise TypeError(f"payload must be a JSON object (a dict), got {type(payload).__name__}")
        _unknown_option(options, "")
        schema = options.pop("schema", None)
        retries = options.pop("retries", 0)
        message = _job_message(task_type, payload, options)
        if schema is not None:
            try:
                schema(payload)
            except Exception as err:  # the schema's own way of saying "invalid"
                raise InvalidPayloadError(str(err) or type(err).__name__) from err
        if not isinstance(retries, int) or retries < 0:
            raise ValueError("retries must be a non-negative integer")
        if "runAtMillis" in message:
            # A coordinator without delayed jobs would ignore the field and run it now.
            self._require("time", "delayed jobs")
        if "dependsOn" in message:
            # Nor one without dependencies: it would run the job before its parents.
            self._require("flows", "dependencies between jobs")
        if _names_queue(message):
            # Nor one without queues: it would run the job outside its queue's limits.
            self._require("queues", "named queues")
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._submit_once(message)
            except (SubmitRejectedError, TransportError) as err:
                resend = (
                    err.retryable
                    if isinstance(err, SubmitRejectedError)
                    else message.get("idempotencyKey") is not None
                )
                if attempt > retries or not resend:
                    raise
                ceiling = min(5.0, 0.2 * 2 ** (attempt - 1))
                time.sleep(random.uniform(0, ceiling))

    def submit_many(self, jobs: Iterable[Mapping[str, Any]]) -> builtins.list[str]:
        """Submits 1..1000 jobs as one batch and returns their ids in the order given.

        Each job is a dict with ``task_type``, ``payload`` and the per-job options of
        ``submit`` (``priority``, ``idempotency_key``, ``max_attempts``,
        ``timeout_millis``, ``queue``, ``group_key``, ``delay_ms``, ``run_at``, ``dedup_key``,
        ``dedup_mode``, ``dedup_window_ms``, ``expires_at``, ``expire_after_ms``; jobs with
        parents go in a flow, ``submit_flow``). All jobs are created, in one commit, or none
        is: an invalid job raises ``RemoteError`` whose ``index`` names it, a batch that does not
        fit under admission control raises ``SubmitRejectedError``, a known idempotency key
        gives its original id, and so does a deduplicated ``dedup_key`` (a key used twice
        in the batch: the second names the first's job). A coordinator that predates batches raises
        ``UnsupportedRequestError`` (nothing is submitted one by one instead). More than
        1000 jobs is a ``ValueError``: split them, each part is its own batch.
        """
        return self.submit_batch(jobs)["jobIds"]

    def submit_batch(self, jobs: Iterable[Mapping[str, Any]]) -> BatchSubmission:
        """``submit_many``, returning also what each job's ``dedup_key`` did:
        ``{"jobIds", "deduplicated", "replaced"}``, lists in the order given (all False
        from a coordinator that does not deduplicate). A key used twice in one batch:
        the second job is deduplicated against the first."""
        elements: builtins.list[Message] = []
        for index, job in enumerate(jobs):
            if not isinstance(job, Mapping):
                raise TypeError(f"job {index} must be a dict")
            options = dict(job)
            task_type = options.pop("task_type", None)
            payload = options.pop("payload", None)
            if not isinstance(task_type, str) or not task_type:
                raise TypeError(f"job {index}: task_type must be a non-empty string")
            if not isinstance(payload, Mapping):
                raise TypeError(f"job {index}: payload must be a JSON object (a dict)")
            _unknown_option(options, f"job {index}: ")
            local = sorted(set(options) & {"schema", "retries", "depends_on", "on_parent_failure"})
            if local:
                raise TypeError(
                    f"job {index}: submit_many takes no {local[0]!r} "
                    "(submit jobs with parents with submit_flow)"
                )
            element = _job_message(task_type, payload, options, f"job {index}: ")
            del element["type"], element["knownStates"]
            elements.append(element)
        if not 1 <= len(elements) <= MAX_BATCH_JOBS:
            raise ValueError(f"submit_many takes 1..{MAX_BATCH_JOBS} jobs, got {len(elements)}")
        if any("runAtMillis" in element for element in elements):
            self._require("time", "delayed jobs")
        if any(_names_queue(element) for element in elements):
            self._require("queues", "named queues")
        reply = self._request({"type": "SUBMIT_JOBS", "jobs": elements})
        if reply["type"] == "SUBMIT_REJECTED":
            raise SubmitRejectedError(reply)
        if reply["type"] == "ERROR" and is_not_understood(reply):
            raise UnsupportedRequestError("bulk submission", text_of(reply, "message"))
        submitted = _expect("SUBMIT_JOBS", reply, "JOBS_SUBMITTED")
        ids = submitted.get("jobIds")
        if not isinstance(ids, builtins.list):
            raise UnexpectedReplyError("SUBMIT_JOBS", "JOBS_SUBMITTED without jobIds")

        def flags(name: str) -> builtins.list[bool]:
            given = submitted.get(name)
            given = given if isinstance(given, builtins.list) else []
            return [i < len(given) and given[i] is True for i in range(len(ids))]

        return {
            "jobIds": [str(job_id) for job_id in ids],
            "deduplicated": flags("deduplicated"),
            "replaced": flags("replaced"),
        }

    def submit_flow(self, flow: Mapping[str, Any]) -> dict[str, str]:
        """Submits a flow: up to 10,000 jobs whose ``depends_on`` name each other by ref
        (forward refs are fine) or existing jobs by id, created in one commit or not at all.
        Returns each ref's job id.

        ``flow`` is ``{"jobs": [{"ref", "task_type", "payload", "depends_on": [...],
        **options}]}`` with the per-job options of ``submit`` (``priority``,
        ``max_attempts``, ``timeout_millis``, ``on_parent_failure``, ``queue``,
        ``group_key``, ``idempotency_key``, ``delay_ms`` / ``run_at``, ``dedup_key``,
        ``dedup_mode``, ``dedup_window_ms``, ``expires_at`` / ``expire_after_ms``). Raises
        ``RemoteError`` (``FLOW_CYCLE``, ``INVALID_FLOW``, ``UNKNOWN_JOB``,
        ``INVALID_PAYLOAD``: nothing was created), ``SubmitRejectedError`` when admission
        control cannot take the whole flow, ``FeatureUnsupportedError`` from a coordinator
        without flows (nothing sent).
        """
        if not isinstance(flow, Mapping) or not isinstance(flow.get("jobs"), (list, tuple)):
            raise TypeError('a flow is {"jobs": [...]}')
        extra = sorted(set(flow) - {"jobs"})
        if extra:
            raise TypeError(f"unknown flow field {extra[0]!r}")
        jobs = [_flow_job(index, job) for index, job in enumerate(flow["jobs"])]
        if not 1 <= len(jobs) <= MAX_FLOW_JOBS:
            raise ValueError(f"a flow has 1..{MAX_FLOW_JOBS} jobs, got {len(jobs)}")
        self._require("flows", "flows")
        if any(_names_queue(job) for job in jobs):
            self._require("queues", "named queues")
        if any(job.get("runAtMillis") is not None for job in jobs):
            self._require("time", "delayed jobs")
        reply = self._request({"type": "SUBMIT_FLOW", "jobs": jobs})
        if reply["type"] == "SUBMIT_REJECTED":
            raise SubmitRejectedError(reply)
        if reply["type"] == "ERROR" and is_not_understood(reply):
            raise FeatureUnsupportedError("flows", text_of(reply, "message"))
        submitted = _expect("SUBMIT_FLOW", reply, "FLOW_SUBMITTED").get("jobs") or []
        return {str(entry["ref"]): str(entry["jobId"]) for entry in submitted}

    def rerun(
        self,
        queue: str,
        *,
        task_type: str | None = None,
        since: datetime.datetime | int | None = None,
        limit: int | None = None,
        max_attempts: int | None = None,
    ) -> RerunResult:
        """Re-runs the FAILED jobs of a queue (a redrive of dead letters): each is QUEUED
        again as the same job, with ``max_attempts`` more attempts (default: the
        coordinator's) and its attempts so far kept. Only jobs of ``task_type``, that
        finished at or after ``since`` (an aware ``datetime`` or epoch ms); newest first, at
        most ``limit`` (1..10,000, default 1,000) per call: ``more`` says whether more
        matched (call again). Returns once the change is durable."""
        check_queue_name(queue)
        message: Message = {"type": "RERUN_JOBS", "queue": queue, "state": "FAILED"}
        if task_type is not None:
            if not isinstance(task_type, str) or not 1 <= len(task_type) <= 256:
                raise ValueError(f"task_type must be 1..{MAX_FILTER_VALUE_LENGTH} characters")
            message["taskType"] = task_type
        if since is not None:
            if isinstance(since, datetime.datetime):
                if since.tzinfo is None:
                    raise ValueError("since must be an aware datetime (with a time zone)")
                since = int(since.timestamp() * 1000)
            message["finishedSinceMillis"] = _int_in("since", 0, 2**53 - 1)(since)
        if limit is not None:
            message["limit"] = _int_in("limit", 1, MAX_RERUN_LIMIT)(limit)
        if max_attempts is not None:
            message["maxAttempts"] = _int_in("max_attempts", 1, MAX_ATTEMPTS_LIMIT)(max_attempts)
        reply = self._request(message)
        if reply["type"] == "ERROR" and is_not_understood(reply):
            raise UnsupportedRequestError("the re-run of failed jobs", text_of(reply, "message"))
        done = _expect("RERUN_JOBS", reply, "JOBS_RERUN")
        return {
            "rerun": int(done.get("rerun") or 0),
            "jobIds": get_str_list(done, "jobIds") or [],
            "more": done.get("more") is True,
        }

    def features(self) -> Features:
        """What the coordinator understands, each probed once per address on a connection
        of its own (an inconclusive probe counts as yes): ``waitJob`` (waits held by the
        coordinator), ``time`` (delayed jobs, schedules), ``flows`` (dependencies),
        ``queues`` (named queues, group keys), ``events`` (``watch``, ``events``),
        ``signals`` (``signal``, ``publish``, triggers)."""
        return {
            "waitJob": self._wait_job_supported(),
            "time": self._supports("time"),
            "flows": self._supports("flows"),
            "queues": self._supports("queues"),
            "events": self._supports("events"),
            "signals": self._supports("signals"),
        }

    def watch(self, job_id: str, *, on_gap: GapSink | None = None) -> EventStream:
        """The job as it is now (``current``), then each change of it as the coordinator
        pushes it (``state``, ``progress``), ending after the event that shows it terminal
        (at once for a job that already is). Subscribed before it returns
        (``EventsUnsupportedError`` from a coordinator without events); ``UnknownJobError``
        for an unknown job at the first ``next``."""
        if not isinstance(job_id, str) or not 1 <= len(job_id) <= MAX_FILTER_VALUE_LENGTH:
            raise ValueError("job_id must be 1..256 characters")
        return self._stream({"jobId": job_id}, watch=True, on_gap=on_gap)

    def events(
        self,
        *,
        queue: str | None = None,
        task_type: str | None = None,
        job_id: str | None = None,
        on_gap: GapSink | None = None,
    ) -> EventStream:
        """Every change of the jobs that match (all given filters must: none = every job):
        a new job, a new state or attempt, new progress, pushed as it happens, until the
        stream is closed (``close()``, the end of a ``with`` block, the client closing).
        Subscribed before it returns: a change made after that is not missed."""
        found: dict[str, str] = {}
        for field, value in (("queue", queue), ("taskType", task_type), ("jobId", job_id)):
            if value is None:
                continue
            if not isinstance(value, str) or not 1 <= len(value) <= MAX_FILTER_VALUE_LENGTH:
                raise ValueError(f"{field} must be 1..{MAX_FILTER_VALUE_LENGTH} characters")
            found[field] = value
        return self._stream(found, watch=False, on_gap=on_gap)

    def _stream(self, filter: dict[str, str], watch: bool, on_gap: GapSink | None) -> EventStream:
        if self._closed:
            raise ClientClosedError()
        stream = EventStream(self, filter, watch=watch, on_gap=on_gap)
        with self._streams_lock:
            self._streams.add(stream)
        return stream.subscribe()

    def _forget(self, stream: EventStream) -> None:
        """A stream ended: the client no longer closes it."""
        with self._streams_lock:
            self._streams.discard(stream)

    def _side_connection(self) -> Connection:
        """A connection of its own to the coordinator the client follows (the leader)."""
        with self._lock:
            if self._closed:
                raise ClientClosedError()
            self._connection(time.monotonic() + self._follow_timeout)
            address = self._dialed
        return Connection.open(
            address.host, address.port, self._connect_timeout, self._tls, self._token
        )

    def _submit_once(self, message: Message) -> JobHandle:
        reply = self._request(message)
        if reply["type"] == "SUBMIT_REJECTED":
            raise SubmitRejectedError(reply)
        return self._handle(_expect("SUBMIT_JOB", reply, "JOB_SUBMITTED"))

    def _handle(self, submitted: Message) -> JobHandle:
        """The handle of a ``JOB_SUBMITTED``."""
        job = submitted.get("job")
        snapshot = (
            cast(JobSnapshot, job)
            if isinstance(job, dict)
            else self.status(str(submitted["jobId"]))
        )
        serving = submitted.get("servingWorkers")
        return JobHandle(
            self,
            snapshot,
            serving if isinstance(serving, int) else None,
            submitted.get("queuePaused") is True,
            submitted.get("deduplicated") is True,
            submitted.get("replaced") is True,
        )

    def status(self, job_id: str) -> JobSnapshot:
        """The job's snapshot; ``RemoteError`` ``UNKNOWN_JOB`` when there is none."""
        reply = self._request(
            {"type": "GET_JOB_STATUS", "jobId": job_id, "knownStates": list(KNOWN_STATES)}
        )
        job: JobSnapshot = _expect("GET_JOB_STATUS", reply, "JOB_STATUS")["job"]
        return job

    def attempts(self, job_id: str) -> builtins.list[dict[str, Any]]:
        """Every attempt of the job, oldest first (empty from a coordinator without history)."""
        reply = self._request(
            {
                "type": "GET_JOB_STATUS",
                "jobId": job_id,
                "attempts": True,
                "knownStates": list(KNOWN_STATES),
            }
        )
        attempts = _expect("GET_JOB_STATUS", reply, "JOB_STATUS").get("attempts")
        return list(attempts) if isinstance(attempts, list) else []

    def cancel(self, job_id: str) -> dict[str, Any]:
        """Cancels a job: ``{"cancelled": bool, "job": snapshot}`` (False: it had ended)."""
        reply = _expect(
            "CANCEL_JOB",
            self._request(
                {"type": "CANCEL_JOB", "jobId": job_id, "knownStates": list(KNOWN_STATES)}
            ),
            "JOB_CANCEL",
        )
        return {"cancelled": reply.get("cancelled") is True, "job": reply.get("job")}

    def signal(self, job_id: str, name: str, payload: Any = None) -> SignalResult:
        """Sends a signal to one job: ``payload`` is any JSON value (default None) of at
        most 256 KiB, ``name`` a name as a queue's. The job holds it until a
        ``ctx.wait_for_signal(name)`` of its handler takes it (at once when the job waits
        for it: ``resumed``); each signal is taken once, oldest first. Returns
        ``{"jobId", "name", "resumed", "signalsHeld"}`` once the signal is durable.

        Raises ``UnknownJobError`` for an unknown job, ``RemoteError`` for a job that has
        ended (``INVALID_REQUEST``) or holds 1,000 signals (``LIMIT_EXCEEDED``),
        ``FeatureUnsupportedError`` from a coordinator without signals, ``TypeError`` /
        ``ValueError`` for bad arguments (nothing sent)."""
        reply = self._extension_request(signal_message(job_id, name, payload))
        return signal_result(expect(reply, "SIGNAL_JOB", "JOB_SIGNALLED"))

    def publish(
        self,
        name: str,
        payload: Any = None,
        *,
        key: str | None = None,
        event_id: str | None = None,
    ) -> PublishResult:
        """Publishes an event: each trigger of ``name`` creates one job whose payload is
        ``payload`` (any JSON value, default None, at most 256 KiB), and every job waiting
        for it (``ctx.wait_for_event(name)`` with this ``key``, or with none) wakes, in one
        commit. ``event_id`` (1..256 characters; default: the coordinator makes one): an id
        published before does nothing again and gives back the first reply, with
        ``duplicate`` True. Returns ``{"eventId", "jobIds", "resumed", "duplicate"}`` once
        the event is durable. Raises as ``signal`` does (``LIMIT_EXCEEDED`` when the jobs
        of its triggers would not fit under the coordinator's limit of active jobs:
        nothing was done)."""
        reply = self._extension_request(publish_message(name, payload, key, event_id))
        return publish_result(expect(reply, "PUBLISH_EVENT", "EVENT_PUBLISHED"))

    def purge(self, state: str, older_than_ms: int) -> int:
        """Deletes the jobs of a terminal state (``COMPLETED``, ``FAILED``, ``CANCELLED``)
        that finished at least ``older_than_ms`` ago, with their attempts; returns how many.
        Their idempotency keys are forgotten."""
        if state not in TERMINAL_STATES:
            raise ValueError(f"state must be one of {', '.join(sorted(TERMINAL_STATES))}")
        older = _int_in("older_than_ms", 0, 2**53 - 1)(older_than_ms)
        message: Message = {"type": "PURGE_JOBS", "state": state, "olderThanMillis": older}
        return int(_expect("PURGE_JOBS", self._request(message), "JOBS_PURGED")["deleted"])

    def worker_list(self) -> dict[str, Any]:
        """``{"workers", "leader", "epoch"}``: the live workers, and the leader that answered
        and its epoch when coordinators share PostgreSQL (both None otherwise)."""
        reply = _expect("LIST_WORKERS", self._request({"type": "LIST_WORKERS"}), "WORKER_LIST")
        return {
            "workers": list(reply.get("workers") or []),
            "leader": reply.get("leader"),
            "epoch": reply.get("epoch"),
        }

    def shards(self) -> dict[str, Any]:
        """``{"shards", "coordinators"}``: each shard of the database with its leader's
        client address (None while none leads it) and epoch, and each coordinator alive
        on it with how many shards it leads (``client.sh shards --json``). An unsharded
        coordinator answers one shard, its own."""
        reply = _expect("LIST_SHARDS", self._request({"type": "LIST_SHARDS"}), "SHARD_LIST")
        return {
            "shards": list(reply.get("shards") or []),
            "coordinators": list(reply.get("coordinators") or []),
        }

    def workers(self) -> builtins.list[dict[str, Any]]:
        """The live workers, sorted by id."""
        reply = _expect("LIST_WORKERS", self._request({"type": "LIST_WORKERS"}), "WORKER_LIST")
        return list(reply.get("workers") or [])

    def wait(self, job_id: str, timeout: float | None = None) -> JobSnapshot:
        """The job's snapshot as soon as it is terminal; ``WaitTimeoutError`` after ``timeout``
        seconds (default: no limit). Held by the coordinator (``WAIT_JOB``) where it can be,
        polled otherwise. Survives its coordinator going away for up to ``follow_timeout``."""
        if timeout is not None and (not math.isfinite(timeout) or timeout < 0):
            raise ValueError("timeout must be a non-negative number of seconds")
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        push = self._wait_job_supported()
        poll = FIRST_POLL_SECONDS
        lost_since: float | None = None
        pause = FIRST_POLL_SECONDS
        while True:
            started = time.monotonic()
            left_ms = (deadline - started) * 1000
            slice_ms = WAIT_SLICE_MS if left_ms > WAIT_SLICE_MS else max(0, math.ceil(left_ms))
            try:
                job = self._wait_job(job_id, slice_ms) if push else self.status(job_id)
            except TransportError as err:
                if err.code == "TLS_FAILED" or self._closed:
                    raise
                now = time.monotonic()
                lost_since = started if lost_since is None else lost_since
                if now - lost_since >= self._follow_timeout or now >= deadline:
                    raise
                time.sleep(min(pause, deadline - now))
                pause = min(LONGEST_POLL_SECONDS, pause * 2)
                continue
            lost_since = None
            pause = FIRST_POLL_SECONDS
            if job is None:
                push = False
                continue
            if job.get("state") in TERMINAL_STATES:
                return job
            now = time.monotonic()
            if now >= deadline:
                raise WaitTimeoutError(job, timeout)
            if not push or now - started < slice_ms / 2000:
                time.sleep(min(poll, max(0.0, deadline - now)))
                poll = min(LONGEST_POLL_SECONDS, poll * 2)

    def result(self, job_id: str, timeout: float | None = None) -> Any:
        """Waits for any job and returns its value (``JobFailedError`` / ``JobCancelledError``)."""
        return settled_value(self.wait(job_id, timeout))

    def list(
        self,
        state: str | None = None,
        *,
        task_type: str | None = None,
        page_size: int | None = None,
        queue: str | None = None,
    ) -> Iterator[JobSnapshot]:
        """Every job matching, newest first, fetched page by page as the iteration goes."""
        cursor: str | None = None
        while True:
            jobs, cursor = self.list_page(
                state=state, task_type=task_type, limit=page_size, cursor=cursor, queue=queue
            )
            yield from jobs
            if cursor is None or not jobs:
                return

    def list_page(
        self,
        state: str | None = None,
        *,
        task_type: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        queue: str | None = None,
    ) -> tuple[builtins.list[JobSnapshot], str | None]:
        """One page, newest first, and the cursor of the next (None on the last page);
        ``queue``: only the jobs of that named queue."""
        if state is not None and state not in JOB_STATES:
            raise ValueError(f"state must be one of {', '.join(JOB_STATES)}, got {state!r}")
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise ValueError("limit must be a positive integer")
        local = cursor is not None and cursor.startswith(_LOCAL_CURSOR)
        message: Message = {
            "type": "LIST_JOBS",
            "limit": limit,
            "state": state,
            "cursor": None if local else cursor,
            "knownStates": list(KNOWN_STATES),
        }
        if task_type is not None:
            message["taskType"] = task_type
        if queue is not None:
            message["queue"] = check_queue_name(queue)
        reply = _expect("LIST_JOBS", self._request(message), "JOB_LIST")
        jobs: list[JobSnapshot] = list(reply.get("jobs") or [])
        ignored = (
            (limit is not None and len(jobs) > limit)
            or (state is not None and any(j.get("state") != state for j in jobs))
            or (task_type is not None and any(j.get("taskType") != task_type for j in jobs))
        )
        if local or ignored:
            return _page_locally(jobs, state, task_type, limit, cursor)
        next_cursor = reply.get("nextCursor")
        return jobs, next_cursor if isinstance(next_cursor, str) else None

    # -------------------------------------------------------------- plumbing

    def _wait_job_supported(self) -> bool:
        with self._lock:
            self._connection(time.monotonic() + self._follow_timeout)
            address = self.address
        known = _remembered(address)
        if known is not None:
            return known
        answer = self._probe(self._dialed)
        if answer is None:
            return True
        _remember(address, answer)
        return answer

    def _supports(self, feature: str) -> bool:
        """Whether the coordinator has an extension that rides on v1 messages (``time``,
        ``flows``, ``queues``) or is a subscription (``events``): probed once per address,
        on a connection of its own, with a request of it that changes nothing. An
        inconclusive probe (no answer) counts as supported and is not remembered."""
        with self._lock:
            self._connection(time.monotonic() + self._follow_timeout)
            address = self.address
        with _features_lock:
            known = _probed_by_address.get((feature, address))
        if known is not None:
            return known
        answer = self._probe(self._dialed, _PROBES[feature]())
        if answer is None:
            return True
        with _features_lock:
            _probed_by_address[(feature, address)] = answer
        return answer

    def _require(self, feature: str, what: str) -> None:
        """``FeatureUnsupportedError`` unless the coordinator has ``feature``; nothing is sent."""
        if not self._supports(feature):
            raise FeatureUnsupportedError(what)

    def _probe(self, address: HostPort, request: Message | None = None) -> bool | None:
        """A request that changes nothing (by default WAIT_JOB for a job that cannot exist),
        on a connection of its own: whether it was understood; None: no answer."""
        try:
            conn = Connection.open(
                address.host, address.port, self._connect_timeout, self._tls, self._token
            )
        except DtpError:
            return None
        try:
            probe = request or {
                "type": "WAIT_JOB",
                "jobId": f"dtp-probe-{uuid.uuid4()}",
                "timeoutMillis": 0,
            }
            reply = conn.request(probe, self._connect_timeout)
        except TransportError as err:
            # Closed before any reply: not understood. No reply in time: inconclusive.
            return None if "no reply" in err.message else False
        finally:
            conn.close()
        return not (reply["type"] == "ERROR" and is_not_understood(reply))

    def _extension_request(self, message: Message) -> Message:
        """A request of an extension the coordinator may not know: after a not-understood
        answer the connection is dropped (a v1 coordinator closes it after such an
        answer), so that the next request dials a fresh one."""
        reply = self._request(message)
        if reply["type"] == "ERROR" and is_not_understood(reply):
            with self._lock:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
        return reply

    def _wait_job(self, job_id: str, timeout_ms: int) -> JobSnapshot | None:
        message = {
            "type": "WAIT_JOB",
            "jobId": job_id,
            "timeoutMillis": timeout_ms,
            "knownStates": list(KNOWN_STATES),
        }
        reply = self._request(message, timeout_ms / 1000 + self._request_timeout)
        if reply["type"] == "ERROR" and is_not_understood(reply):
            with self._lock:
                if self._conn is not None:
                    self._conn.close()  # a v1 coordinator closes it after such an answer
                    self._conn = None
            _remember(self.address, False)
            return None
        job: JobSnapshot = _expect("WAIT_JOB", reply, "JOB_STATUS")["job"]
        return job

    def _request(self, message: Message, timeout: float | None = None) -> Message:
        with self._lock:
            if self._closed:
                raise ClientClosedError()
            deadline = time.monotonic() + self._follow_timeout
            pause = _FIRST_PAUSE
            while True:
                conn = self._connection(deadline)
                try:
                    reply = conn.request(message, timeout or self._request_timeout)
                except TransportError:
                    self._conn = None
                    if (
                        self._ring.several
                        and not self._closed
                        and _is_safe_to_repeat(message)
                        and time.monotonic() < deadline
                    ):
                        continue
                    raise
                if reply["type"] != "ERROR" or reply.get("code") != NOT_LEADER:
                    self._ring.succeeded()
                    return reply
                leader = reply.get("leader")
                self._ring.not_leader(leader if isinstance(leader, str) else None, self._port)
                conn.close()
                self._conn = None
                left = deadline - time.monotonic()
                if left <= 0:
                    return reply
                if self._ring.should_pause():
                    time.sleep(min(pause, left))
                    pause = min(pause * 2, _LONGEST_PAUSE)

    def _connection(self, deadline: float) -> Connection:
        if self._closed:
            raise ClientClosedError()
        if self._conn is not None and self._conn.still_open():
            return self._conn
        pause = _FIRST_PAUSE
        while True:
            address = self._ring.next()
            self._dialed = address
            try:
                self._conn = Connection.open(
                    address.host, address.port, self._connect_timeout, self._tls, self._token
                )
                return self._conn
            except NotLeaderError as err:
                self._ring.not_leader(err.leader, self._port)
                failure: DtpError = err
            except TransportError as err:
                self._ring.failed()
                failure = err
            left = deadline - time.monotonic()
            named = isinstance(failure, NotLeaderError) and failure.leader is not None
            if (not self._ring.several and not named) or left <= 0:
                if not self._ring.several:
                    raise failure
                raise TransportError(
                    "CONNECT_FAILED",
                    f"no coordinator of {self._ring.describe()} answered "
                    f"(last: {address}: {failure.message})",
                ) from failure
            if self._ring.should_pause():
                time.sleep(min(pause, left))
                pause = min(pause * 2, _LONGEST_PAUSE)


def _expect(request: str, reply: Message, kind: str) -> Message:
    if reply["type"] == kind:
        return reply
    if reply["type"] == "ERROR":
        raise remote_error(reply)
    raise UnexpectedReplyError(request, str(reply["type"]))


def _page_locally(
    every: list[JobSnapshot],
    state: str | None,
    task_type: str | None,
    limit: int | None,
    cursor: str | None,
) -> tuple[list[JobSnapshot], str | None]:
    """The page asked for, cut from every job of a v1 reply (newest first)."""
    matching = [
        j
        for j in every
        if (state is None or j.get("state") == state)
        and (task_type is None or j.get("taskType") == task_type)
    ]
    start = 0
    if cursor is not None and cursor.startswith(_LOCAL_CURSOR):
        created_text, _, job_id = cursor[len(_LOCAL_CURSOR) :].partition(":")
        ids = [j.get("jobId") for j in matching]
        if job_id in ids:
            start = ids.index(job_id) + 1
        else:
            created = int(created_text) if created_text.isdigit() else 0
            older = [
                i for i, j in enumerate(matching) if int(j.get("createdAtMillis", 0)) < created
            ]
            start = older[0] if older else len(matching)
    end = len(matching) if limit is None else min(len(matching), start + limit)
    page = matching[start:end]
    if end < len(matching) and page:
        last = page[-1]
        return page, f"{_LOCAL_CURSOR}{last.get('createdAtMillis')}:{last.get('jobId')}"
    return page, None


_default_lock = threading.Lock()
_default: Client | None = None


def set_default_client(client: Client | None) -> None:
    """The client ``Task.submit`` uses when given none (None: forget it)."""
    global _default
    with _default_lock:
        _default = client


def default_client() -> Client:
    """The default client: the one set, else a ``Client()`` of ``DTP_HOST``/``DTP_PORT``,
    made on first use and kept."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Client()
        return _default
