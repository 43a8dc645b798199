"""The task SDK: how task modules declare their handlers, and what a handler gets.

    import dtp

    @dtp.task("images.resize", schema=check_resize)
    def resize(payload, ctx):
        ctx.log.info("resizing %s", payload["path"])
        if ctx.cancelled.is_set():
            ...
        return {"width": 80}

A handler is ``def f(payload, ctx)`` or ``async def f(payload, ctx)``. It
returns any JSON value, or raises: ``NonRetryableError`` (or any exception
whose ``retryable`` attribute is False) fails the job at once, any other
exception fails the attempt and the job is retried while attempts remain.

``schema=`` is a callable run on the payload before the handler: it raises
when the payload is invalid (the job then fails at once with ``Invalid
payload: ...``), and what it returns, unless None, is what the handler gets.
``lambda p: jsonschema.validate(p, SCHEMA)`` fits; so does a pydantic model
class (its ``model_validate``, or v1 ``parse_obj``, is what is called).

Results follow the rules of the TypeScript SDK: a ``str`` travels as it is;
any other JSON value (None, bool, int, float, list, dict with string keys)
travels as its JSON text, so the typed clients get it back unchanged.
Anything JSON cannot carry exactly (a tuple, a set, bytes, a datetime, NaN, a
dict with non-string keys, an integer beyond 2**53 - 1 that JavaScript would
round, a cycle) fails the attempt with an error naming where it was found.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import logging
import os
import sys
import threading
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar

from .framing import encode_json
from .protocol import (
    MAX_PROGRESS_MESSAGE_BYTES,
    MAX_RESULT_BYTES,
    MAX_RETRY_AFTER_MS,
    MAX_SAFE_INTEGER,
    RATE_LIMIT_SCOPES,
    custom_name_problem,
)

if TYPE_CHECKING:
    from .client import Client, JobHandle
    from .shapes import ReceivedEvent, ReceivedSignal

R = TypeVar("R")

_MAX_RESULT_DEPTH = 1000


class NonRetryableError(Exception):
    """Raise it to fail the job at once, whatever attempts remain."""

    retryable = False


class RateLimited(Exception):
    """Raise it when a service the handler calls says "too many requests" (an HTTP 429):
    the attempt ends without using one of the job's attempts, and the job runs again
    after ``retry_after_ms`` (1..86,400,000). ``scope``: what waits that long, ``"job"``
    (the default) this job only, ``"group"`` every job of its group key in its queue,
    ``"queue"`` every job of its queue (attempts already running go on). The job's
    error reads ``RATE_LIMITED: <message>`` (default: the wait and the scope).

    It needs a coordinator that offers rate limits; another one sees an ordinary
    failure that is retried (and counts). A bad value is a ``TypeError`` or
    ``ValueError`` where it is raised."""

    retryable = True

    def __init__(
        self, *, retry_after_ms: int, scope: str = "job", message: str | None = None
    ) -> None:
        if isinstance(retry_after_ms, bool) or not isinstance(retry_after_ms, int):
            raise TypeError(
                f"retry_after_ms must be an integer number of ms, got {retry_after_ms!r}"
            )
        if not 1 <= retry_after_ms <= MAX_RETRY_AFTER_MS:
            raise ValueError(
                f"retry_after_ms must be 1..{MAX_RETRY_AFTER_MS}, got {retry_after_ms}"
            )
        if scope not in RATE_LIMIT_SCOPES:
            raise ValueError(f"scope must be one of {', '.join(RATE_LIMIT_SCOPES)}, got {scope!r}")
        if message is not None and not isinstance(message, str):
            raise TypeError("message must be a string")
        if message is None:
            message = f"retry after {retry_after_ms} ms (scope {scope})"
        super().__init__(message)
        self.retry_after_ms = retry_after_ms
        self.scope = scope
        self.message = message
        """What the job's error says after ``RATE_LIMITED: ``."""

    def __reduce__(self) -> tuple[Any, ...]:
        # The arguments are keywords: rebuilt from them (copy, pickle), not from ``args``.
        return (_rate_limited, (self.retry_after_ms, self.scope, self.message))


def _rate_limited(retry_after_ms: int, scope: str, message: str) -> RateLimited:
    return RateLimited(retry_after_ms=retry_after_ms, scope=scope, message=message)


class TaskFailed(Exception):
    """Raise it to fail the attempt with exactly this message (retried while attempts remain)."""


class InvalidPayloadError(NonRetryableError):
    """The payload failed the task's schema (or a built-in's check)."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"Invalid payload: {detail}")


class TaskDeclarationError(ValueError):
    """``@dtp.task`` was used with a name or schema that cannot work."""


class TaskModuleError(Exception):
    """A task module could not be used; the message names the module and the problem."""

    def __init__(self, module: str, problem: str) -> None:
        super().__init__(f"task module {module}: {problem}")
        self.module = module
        self.problem = problem


@dataclass(frozen=True)
class TaskDeclaration:
    name: str
    handler: Callable[..., Any]
    schema: Callable[[Any], Any] | None
    is_async: bool
    isolate: bool = False

    @property
    def isolated(self) -> bool:
        """Runs in a task process of its own: a ``def`` handler, or ``isolate=True``."""
        return self.isolate or not self.is_async


_declared: list[TaskDeclaration] = []
_declared_lock = threading.Lock()


def _schema_callable(schema: Any) -> Callable[[Any], Any] | None:
    if schema is None:
        return None
    for method in ("model_validate", "parse_obj"):  # a pydantic (v2, v1) model class
        validate = getattr(schema, method, None) if isinstance(schema, type) else None
        if callable(validate):
            bound: Callable[[Any], Any] = validate
            return bound
    if not callable(schema):
        raise TaskDeclarationError(
            "schema must be a callable that raises on an invalid payload, "
            f"got {type(schema).__name__}"
        )
    checked: Callable[[Any], Any] = schema
    return checked


class Task(Generic[R]):
    """A task declared with ``@dtp.task``: still callable as the function it wraps
    (``shout(payload, ctx)``, in tests), and ``shout.submit(payload, client=c,
    **options)`` submits a job of it (as Celery's ``.delay`` does)."""

    def __init__(self, name: str, handler: Callable[..., R]) -> None:
        self.name = name
        self.handler = handler
        functools.update_wrapper(self, handler)

    def __call__(self, payload: Any, ctx: Any) -> R:
        return self.handler(payload, ctx)

    def submit(
        self, payload: Mapping[str, Any], *, client: Client | None = None, **options: Any
    ) -> JobHandle:
        """Submits a job of this task and returns its ``JobHandle``: through ``client``,
        else the default client (``dtp.set_default_client``, else a ``dtp.Client()`` made
        from ``DTP_HOST``/``DTP_PORT`` on first use). ``options`` are ``submit``'s."""
        from .client import default_client

        chosen = client if client is not None else default_client()
        return chosen.submit(self.name, payload, **options)

    def __repr__(self) -> str:
        return f"<dtp task {self.name!r}>"


def task(
    name: str, *, schema: Any = None, isolate: bool = False
) -> Callable[[Callable[..., R]], Task[R]]:
    """Marks ``def f(payload, ctx)`` (or ``async def``) as the handler of task type ``name``.

    An ``async def`` handler is shared: its attempts run as asyncio tasks, many
    at once, in a few task processes. A ``def`` handler is isolated: each
    attempt has a task process to itself while it runs; ``isolate=True`` makes
    an ``async def`` one isolated too (one that blocks its event loop, or that
    must not share a process). What it returns is a ``Task``: called, it calls
    the function (in tests); ``.submit(payload, client=c)`` submits a job.
    """
    problem = custom_name_problem(name)
    if problem is not None:
        raise TaskDeclarationError(problem)
    if not isinstance(isolate, bool):
        raise TaskDeclarationError(f"task {name!r}: isolate must be True or False")
    check = _schema_callable(schema)

    def declare(handler: Callable[..., R]) -> Task[R]:
        if not callable(handler):
            raise TaskDeclarationError(f"task {name!r}: @dtp.task must decorate a function")
        declaration = TaskDeclaration(
            name, handler, check, inspect.iscoroutinefunction(handler), isolate
        )
        with _declared_lock:
            _declared.append(declaration)
        return Task(name, handler)

    return declare


# ---------------------------------------------------------------- context


class TaskContext:
    """What a running attempt may look at.

    ``cancelled`` is set when the attempt is cancelled or its deadline passes
    (``cancel_reason`` says which); a handler that does not stop within the
    worker's cancel grace has its process terminated (for a shared handler,
    the other attempts of that process are requeued). An ``async def``
    handler is also cancelled the asyncio way (``CancelledError`` at its next
    await).
    """

    __slots__ = (
        "_durable",
        "_progress",
        "_reason",
        "attempt_id",
        "attempt_number",
        "cancelled",
        "deadline_at_ms",
        "job_id",
        "log",
        "max_attempts",
        "parents",
        "task_type",
    )

    def __init__(
        self,
        *,
        job_id: str,
        attempt_id: str,
        attempt_number: int,
        max_attempts: int | None,
        deadline_at_ms: int | None,
        task_type: str,
        cancelled: threading.Event | None = None,
        log: logging.LoggerAdapter[logging.Logger] | None = None,
        progress: Callable[[float, str | None], None] | None = None,
        parents: list[dict[str, Any]] | None = None,
        durable: Any = None,
    ) -> None:
        self.job_id = job_id
        self.attempt_id = attempt_id
        self.attempt_number = attempt_number
        self.max_attempts = max_attempts
        self.deadline_at_ms = deadline_at_ms
        self.task_type = task_type
        self.cancelled = cancelled if cancelled is not None else threading.Event()
        self.log = (
            log
            if log is not None
            else logging.LoggerAdapter(
                logging.getLogger(f"dtp.task.{task_type}"),
                {"job_id": job_id, "attempt_id": attempt_id},
            )
        )
        self._reason: str | None = None
        self._progress = progress
        self.parents: list[dict[str, Any]] = parents or []
        """The job's parents (``depends_on``), each ``{"jobId", "taskType", "state",
        "result", "omitted"}``, the result decoded as ``job.result()`` would."""
        self._durable = durable

    def _steps(self) -> Any:
        if self._durable is None:
            from .errors import DtpError

            raise DtpError(
                "UNSUPPORTED_FEATURE", "this ctx belongs to no worker's attempt (made by hand)"
            )
        return self._durable

    async def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """Runs ``fn`` (sync or async) once for the job and records its JSON value; a later
        attempt gets the recorded value back without running ``fn``. Steps run one at a
        time, each name once per run, in the same order every run (another order fails the
        job: ``NON_DETERMINISTIC``)."""
        return await self._steps().step(name, fn)

    async def sleep(self, duration: Any) -> None:
        """Ends the attempt without using one of ``max_attempts`` and runs the handler again
        ``duration`` later (milliseconds, a ``datetime.timedelta`` or a duration such as
        ``"5m"``), its steps replayed; there, this sleep returns at once."""
        await self._steps().sleep(duration)

    async def wait_for(self, job_id: str) -> dict[str, Any]:
        """Ends the attempt until job ``job_id`` has ended, then runs the handler again; there
        this returns ``{"jobId", "state", "result", "error", "omitted"}`` of that job."""
        return dict(await self._steps().wait_for(job_id))

    async def wait_for_signal(self, name: str, timeout: Any = None) -> ReceivedSignal | None:
        """Takes the oldest signal named ``name`` sent to this job (``client.signal``) that
        no earlier call took, and returns ``{"name", "payload", "atMillis"}``; None when
        ``timeout`` passes first (as ``ctx.sleep`` takes a duration: milliseconds, a
        ``datetime.timedelta`` or ``"30s"``; default: no timeout). Until one comes the
        attempt ends without using one of ``max_attempts`` (the job is ``WAITING``) and the
        handler runs again when it comes, its steps replayed; there this returns the same
        signal at once. Needs a coordinator that offers signals (else ``UNSUPPORTED_FEATURE``)."""
        durable = self._steps()
        signal: ReceivedSignal | None = await durable.wait_for_signal(name, timeout)
        return signal

    async def wait_for_event(
        self, name: str, key: str | None = None, timeout: Any = None
    ) -> ReceivedEvent | None:
        """As ``wait_for_signal``, for an event named ``name`` (and carrying ``key``, when
        given) published after the wait began (``client.publish``); every job waiting for
        it wakes. Returns ``{"name", "payload", "key", "eventId", "atMillis"}``, or None when
        ``timeout`` passes first."""
        durable = self._steps()
        event: ReceivedEvent | None = await durable.wait_for_event(name, key, timeout)
        return event

    async def enqueue(self, task_type: str, payload: Mapping[str, Any], **options: Any) -> str:
        """Submits a child job (its snapshot names this job as ``parentJobId``) and returns
        its id. The same call in a later attempt returns the child made the first time:
        the call is known by ``key=``, or by its place among this attempt's calls without
        one. Options: ``key``, ``queue``, ``group_key``, ``priority``, ``max_attempts``,
        ``timeout_millis``, ``delay_ms`` / ``run_at``."""
        job_id: str = await self._steps().enqueue(task_type, payload, options)
        return job_id

    @property
    def cancel_reason(self) -> str | None:
        """``"cancel"`` or ``"deadline"`` once ``cancelled`` is set, else None."""
        return self._reason

    def _cancel(self, reason: str) -> None:
        if self._reason is None:
            self._reason = reason
        self.cancelled.set()

    def progress(self, fraction: float, message: str | None = None) -> None:
        """Reports how far the attempt is: ``fraction`` from 0 to 1, and an
        optional message of at most 1 KiB of UTF-8 (anything else raises
        ``ValueError``). Call it as often as you like: the worker sends a few
        reports a second at most, always the latest, and the job's snapshot
        shows it as ``progress`` (kept once the job ends)."""
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
            raise ValueError(
                f"ctx.progress: fraction must be a number from 0 to 1, got {fraction!r}"
            )
        if not 0 <= fraction <= 1:
            raise ValueError(
                f"ctx.progress: fraction must be a number from 0 to 1, got {fraction!r}"
            )
        if message is not None and not isinstance(message, str):
            raise ValueError("ctx.progress: message must be a string")
        if message is not None and len(message.encode("utf-8")) > MAX_PROGRESS_MESSAGE_BYTES:
            raise ValueError(
                f"ctx.progress: message must be at most {MAX_PROGRESS_MESSAGE_BYTES} bytes of UTF-8"
            )
        if self._progress is not None:
            self._progress(float(fraction), message)

    def raise_if_cancelled(self) -> None:
        """Raises ``TaskCancelled`` once the attempt was cancelled or its deadline passed."""
        if self.cancelled.is_set():
            raise TaskCancelled(self._reason or "cancel")


class TaskCancelled(Exception):
    """The attempt was stopped (its result would never be accepted anyway)."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            "the attempt's deadline passed" if reason == "deadline" else "the attempt was cancelled"
        )
        self.reason = reason


# ---------------------------------------------------------------- results


class ResultNotJsonError(Exception):
    """A handler returned something JSON cannot carry exactly."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"the handler's result is not a JSON value: {detail}")
        self.detail = detail


def _kind(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    hints = {
        tuple: " (convert it to a list)",
        set: " (convert it to a list)",
        frozenset: " (convert it to a list)",
        bytes: " (decode it to a str)",
    }
    name = type(value).__name__
    hint = next(
        (h for t, h in hints.items() if isinstance(value, t)), " (convert it to plain data)"
    )
    return f"a {name}{hint}"


def _check_json(value: Any, path: str, ancestors: set[int]) -> None:
    if value is None or isinstance(value, (str, bool)):
        return
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise ResultNotJsonError(
                f"{path} is {value}, beyond 2**53 - 1, which JavaScript readers would round"
            )
        return
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ResultNotJsonError(f"{path} is {value!r}")
        return
    if not isinstance(value, (list, dict)):
        raise ResultNotJsonError(f"{path} is {_kind(value)}")
    if id(value) in ancestors:
        raise ResultNotJsonError(f"{path} refers back to itself (a cycle)")
    if len(ancestors) >= _MAX_RESULT_DEPTH:
        raise ResultNotJsonError(f"{path} is nested deeper than {_MAX_RESULT_DEPTH} levels")
    ancestors.add(id(value))
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_json(item, f"{path}[{i}]", ancestors)
    else:
        for key, item in value.items():
            if not isinstance(key, str):
                raise ResultNotJsonError(f"{path} has the key {key!r}, which is not a str")
            _check_json(item, f"{path}.{key}", ancestors)
    ancestors.discard(id(value))


def encode_result(value: Any) -> tuple[str, str]:
    """``(result, resultFormat)`` for TASK_RESULT; raises ``ResultNotJsonError``."""
    if isinstance(value, str):
        return str(value), "text"
    if value is None:
        return "null", "json"
    _check_json(value, "result", set())
    return encode_json(value), "json"


def result_bytes(result: str) -> int:
    """A result's size as the coordinator measures it: UTF-8 of its JSON string, no quotes."""
    return len(encode_json(result).encode("utf-8", "surrogatepass")) - 2


def result_too_large(result: str) -> str | None:
    """The error for a result over the limit, or None when it fits."""
    size = len(result)
    if size * 6 + 2 <= MAX_RESULT_BYTES:
        return None  # fits whatever its escaping
    size = result_bytes(result)
    if size <= MAX_RESULT_BYTES:
        return None
    return f"result too large ({size} bytes; limit {MAX_RESULT_BYTES})"


def describe_exception(err: BaseException) -> str:
    """An attempt's error text: the message, with the type when that helps."""
    if isinstance(err, (NonRetryableError, TaskCancelled, TaskFailed)) and str(err):
        return str(err)
    text = str(err)
    name = type(err).__name__
    if not text:
        return f"{name} without a message"
    return f"{name}: {text}"


def is_retryable(err: BaseException) -> bool:
    return getattr(err, "retryable", True) is not False


# ----------------------------------------------------------- task modules


def _module_name_for(path: str) -> str:
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem.isidentifier() and stem not in sys.modules:
        return stem
    n = 1
    while f"_dtp_task_module_{n}" in sys.modules:
        n += 1
    return f"_dtp_task_module_{n}"


def _where(err: BaseException) -> str:
    frames = traceback.extract_tb(err.__traceback__)
    for frame in reversed(frames):
        if "importlib" not in frame.filename:
            return f" (at {frame.filename} line {frame.lineno})"
    return ""


def is_file_spec(spec: str) -> bool:
    return spec.endswith(".py") or os.sep in spec or os.path.isfile(spec)


def _import(spec: str) -> None:
    try:
        if is_file_spec(spec):
            path = os.path.abspath(spec)
            if not os.path.isfile(path):
                raise TaskModuleError(spec, f"cannot be found: no such file {path}")
            folder = os.path.dirname(path)
            if folder not in sys.path:
                sys.path.insert(0, folder)
            name = _module_name_for(path)
            module_spec = importlib.util.spec_from_file_location(name, path)
            if module_spec is None or module_spec.loader is None:
                raise TaskModuleError(spec, "cannot be loaded: not a Python source file")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            try:
                module_spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
        else:
            importlib.import_module(spec)
    except TaskModuleError:
        raise
    except TaskDeclarationError as err:
        raise TaskModuleError(spec, f"{err}{_where(err)}") from None
    except ModuleNotFoundError as err:
        missing = err.name or ""
        if not is_file_spec(spec) and (spec == missing or spec.startswith(missing + ".")):
            raise TaskModuleError(
                spec,
                f"cannot be found: no module named {missing!r} on the import path "
                "(the working directory and PYTHONPATH)",
            ) from None
        raise TaskModuleError(
            spec, f"cannot be loaded: {describe_exception(err)}{_where(err)}"
        ) from None
    except SystemExit as err:
        raise TaskModuleError(spec, f"cannot be loaded: it called sys.exit({err.code!r})") from None
    except Exception as err:
        raise TaskModuleError(
            spec, f"cannot be loaded: {describe_exception(err)}{_where(err)}"
        ) from None


def load_task_modules(specs: list[str]) -> dict[str, TaskDeclaration]:
    """Imports every module (file paths or module names) and returns its tasks by name.

    Raises ``TaskModuleError`` for a module that cannot be found or imported, declares
    no task, or declares a name twice (in itself or beside another module).
    """
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    tasks: dict[str, TaskDeclaration] = {}
    owners: dict[str, str] = {}
    seen: dict[str, str] = {}
    for spec in specs:
        key = os.path.abspath(spec) if is_file_spec(spec) else spec
        if key in seen:
            raise TaskModuleError(spec, f"is listed twice (as {seen[key]})")
        seen[key] = spec
        with _declared_lock:
            before = len(_declared)
        _import(spec)
        with _declared_lock:
            new = _declared[before:]
        if not new:
            raise TaskModuleError(spec, 'declares no task (mark a handler with @dtp.task("name"))')
        for declaration in new:
            other = owners.get(declaration.name)
            if other == spec:
                raise TaskModuleError(spec, f"declares task {declaration.name!r} twice")
            if other is not None:
                raise TaskModuleError(
                    spec, f"task {declaration.name!r} is already declared by task module {other}"
                )
            owners[declaration.name] = spec
            tasks[declaration.name] = declaration
    return tasks
