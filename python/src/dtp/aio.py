"""``dtp.AsyncClient``: the client's methods as coroutines, for code on an
asyncio event loop.

    async with dtp.AsyncClient("localhost:7071") as client:
        job = await client.submit("text.shout", {"text": "hi"}, queue="emails")
        print(await job.result(timeout=30))
        async for event in client.watch(job.job_id):
            print(event["event"], event["job"]["state"])

Each call runs the synchronous ``Client``'s on a thread of the loop's default
executor (``asyncio.to_thread``), so the loop never blocks on the network.
The requests of one ``AsyncClient`` go out one at a time, as a ``Client``'s
do; for requests side by side, use several clients. ``watch`` and ``events``
read their pushed events on such a thread too, one read at a time; the end of
an ``async with`` over them (or ``aclose()``, or their client closing) ends
the subscription.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, Callable, TypeVar

from .client import Client, JobHandle
from .events import EventStream, GapSink
from .protocol import JobSnapshot
from .shapes import (
    BatchSubmission,
    Features,
    PublishResult,
    QueueInfo,
    RerunResult,
    ScheduleSnapshot,
    SignalResult,
    TriggerSnapshot,
    WatchEvent,
)

T = TypeVar("T")


async def _run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(fn, *args, **kwargs))


class AsyncJobHandle:
    """A submitted job, with ``result``, ``wait``, ``status`` and ``cancel`` as coroutines."""

    def __init__(self, handle: JobHandle) -> None:
        self._handle = handle
        self.job_id = handle.job_id
        self.snapshot = handle.snapshot
        self.serving_workers = handle.serving_workers
        self.queue_paused = handle.queue_paused
        self.deduplicated = handle.deduplicated
        self.replaced = handle.replaced

    async def result(self, timeout: float | None = None) -> Any:
        return await _run(self._handle.result, timeout)

    async def wait(self, timeout: float | None = None) -> JobSnapshot:
        return await _run(self._handle.wait, timeout)

    async def status(self) -> JobSnapshot:
        return await _run(self._handle.status)

    async def cancel(self) -> dict[str, Any]:
        return await _run(self._handle.cancel)

    def __repr__(self) -> str:
        return f"AsyncJobHandle({self.job_id!r}, state={self.snapshot.get('state')!r})"


class AsyncEventStream:
    """``async for`` over an ``EventStream``, subscribed on a thread at ``async with`` (or
    at the first event); ``aclose()``, or the end of the ``async with``, ends it."""

    def __init__(self, open_stream: Callable[[], EventStream]) -> None:
        self._open = open_stream
        self._stream: EventStream | None = None
        self._closed = False

    async def subscribe(self) -> AsyncEventStream:
        """Subscribes now: every change from then on is pushed. Idempotent."""
        if self._stream is None:
            stream = await _run(self._open)
            if self._closed:
                stream.close()
            self._stream = stream
        return self

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> WatchEvent:
        if self._closed:
            raise StopAsyncIteration
        await self.subscribe()
        stream = self._stream
        assert stream is not None
        try:
            return await _run(_next_event, stream)
        except BaseException:
            stream.close()
            raise

    async def aclose(self) -> None:
        self._closed = True
        if self._stream is not None:
            self._stream.close()

    async def __aenter__(self) -> AsyncEventStream:
        return await self.subscribe()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _next_event(stream: EventStream) -> WatchEvent:
    try:
        return next(stream)
    except StopIteration:
        raise StopAsyncIteration from None


class AsyncQueues:
    """``client.queues`` as coroutines."""

    def __init__(self, client: Client) -> None:
        self._queues = client.queues

    async def list(self) -> builtins.list[QueueInfo]:
        return await _run(self._queues.list)

    async def get(self, name: str) -> QueueInfo:
        return await _run(self._queues.get, name)

    async def pause(self, name: str, *, create: bool = False) -> QueueInfo:
        return await _run(self._queues.pause, name, create=create)

    async def resume(self, name: str, *, create: bool = False) -> QueueInfo:
        return await _run(self._queues.resume, name, create=create)

    async def set(self, name: str, **limits: Any) -> QueueInfo:
        return await _run(self._queues.set, name, **limits)


class AsyncSchedules:
    """``client.schedules`` as coroutines."""

    def __init__(self, client: Client) -> None:
        self._schedules = client.schedules

    async def set(self, name: str, task_type: str, **options: Any) -> ScheduleSnapshot:
        return await _run(self._schedules.set, name, task_type, **options)

    async def list(self) -> builtins.list[ScheduleSnapshot]:
        return await _run(self._schedules.list)

    async def get(self, name: str) -> ScheduleSnapshot:
        return await _run(self._schedules.get, name)

    async def pause(self, name: str) -> ScheduleSnapshot:
        return await _run(self._schedules.pause, name)

    async def resume(self, name: str) -> ScheduleSnapshot:
        return await _run(self._schedules.resume, name)

    async def delete(self, name: str) -> None:
        await _run(self._schedules.delete, name)

    async def trigger(self, name: str) -> AsyncJobHandle:
        return AsyncJobHandle(await _run(self._schedules.trigger, name))


class AsyncTriggers:
    """``client.triggers`` as coroutines."""

    def __init__(self, client: Client) -> None:
        self._triggers = client.triggers

    async def set(
        self,
        name: str,
        *,
        event: str,
        task_type: str,
        queue: str | None = None,
        priority: str | None = None,
        max_attempts: int | None = None,
    ) -> TriggerSnapshot:
        return await _run(
            self._triggers.set,
            name,
            event=event,
            task_type=task_type,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
        )

    async def list(self) -> builtins.list[TriggerSnapshot]:
        return await _run(self._triggers.list)

    async def delete(self, name: str) -> bool:
        return await _run(self._triggers.delete, name)


class AsyncClient:
    """The methods of ``dtp.Client`` as coroutines; the same arguments (see ``Client``)."""

    def __init__(self, address: str | None = None, **options: Any) -> None:
        self._client = Client(address, **options)
        self.queues = AsyncQueues(self._client)
        self.schedules = AsyncSchedules(self._client)
        self.triggers = AsyncTriggers(self._client)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def address(self) -> str:
        return self._client.address

    async def close(self) -> None:
        """Closes the client and its event streams. Idempotent."""
        await _run(self._client.close)

    async def submit(
        self, task_type: str, payload: Mapping[str, Any], **options: Any
    ) -> AsyncJobHandle:
        return AsyncJobHandle(await _run(self._client.submit, task_type, payload, **options))

    async def submit_many(self, jobs: Iterable[Mapping[str, Any]]) -> builtins.list[str]:
        return await _run(self._client.submit_many, builtins.list(jobs))

    async def submit_batch(self, jobs: Iterable[Mapping[str, Any]]) -> BatchSubmission:
        return await _run(self._client.submit_batch, builtins.list(jobs))

    async def submit_flow(self, flow: Mapping[str, Any]) -> dict[str, str]:
        return await _run(self._client.submit_flow, flow)

    async def status(self, job_id: str) -> JobSnapshot:
        return await _run(self._client.status, job_id)

    async def attempts(self, job_id: str) -> builtins.list[dict[str, Any]]:
        return await _run(self._client.attempts, job_id)

    async def cancel(self, job_id: str) -> dict[str, Any]:
        return await _run(self._client.cancel, job_id)

    async def signal(self, job_id: str, name: str, payload: Any = None) -> SignalResult:
        return await _run(self._client.signal, job_id, name, payload)

    async def publish(
        self,
        name: str,
        payload: Any = None,
        *,
        key: str | None = None,
        event_id: str | None = None,
    ) -> PublishResult:
        return await _run(self._client.publish, name, payload, key=key, event_id=event_id)

    async def purge(self, state: str, older_than_ms: int) -> int:
        return await _run(self._client.purge, state, older_than_ms)

    async def worker_list(self) -> dict[str, Any]:
        return await _run(self._client.worker_list)

    async def workers(self) -> builtins.list[dict[str, Any]]:
        return await _run(self._client.workers)

    async def shards(self) -> dict[str, Any]:
        return await _run(self._client.shards)

    async def wait(self, job_id: str, timeout: float | None = None) -> JobSnapshot:
        return await _run(self._client.wait, job_id, timeout)

    async def result(self, job_id: str, timeout: float | None = None) -> Any:
        return await _run(self._client.result, job_id, timeout)

    async def list_page(
        self, state: str | None = None, **query: Any
    ) -> tuple[builtins.list[JobSnapshot], str | None]:
        return await _run(self._client.list_page, state, **query)

    async def list(
        self,
        state: str | None = None,
        *,
        task_type: str | None = None,
        page_size: int | None = None,
        queue: str | None = None,
    ) -> AsyncIterator[JobSnapshot]:
        """Every job matching, newest first, a page fetched at a time."""
        cursor: str | None = None
        while True:
            jobs, cursor = await self.list_page(
                state, task_type=task_type, limit=page_size, cursor=cursor, queue=queue
            )
            for job in jobs:
                yield job
            if cursor is None or not jobs:
                return

    async def rerun(self, queue: str, **options: Any) -> RerunResult:
        return await _run(self._client.rerun, queue, **options)

    async def features(self) -> Features:
        return await _run(self._client.features)

    def watch(self, job_id: str, *, on_gap: GapSink | None = None) -> AsyncEventStream:
        """``async for event in client.watch(job_id)``: as ``Client.watch``."""
        return AsyncEventStream(functools.partial(self._client.watch, job_id, on_gap=on_gap))

    def events(self, **filters: Any) -> AsyncEventStream:
        """``async with client.events(queue=...) as events: async for event in events``: as
        ``Client.events``, subscribed when the ``async with`` begins."""
        return AsyncEventStream(functools.partial(self._client.events, **filters))
