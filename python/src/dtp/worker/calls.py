"""The calls of running attempts (``ctx.step``, ``ctx.enqueue``, ...): each goes
to the coordinator on its attempt's connection with the attempt's ids and a
fresh ``requestId`` (one counter for the worker's life, so unique on every
connection), and its answer (a reply, or an ``ERROR`` that carries that
``requestId``) goes back to the handler that made it, once. A call whose
connection ends first is answered ``CONNECTION_LOST``; one whose attempt ended
is forgotten (nobody waits for it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..framing import FrameTooLargeError, Message
from .attempt import Attempt
from .durable import CALL_FEATURES, MAX_CALLS_PER_ATTEMPT
from .link import Link


@dataclass
class _Call:
    link: Link
    attempt: Attempt
    answer: Callable[[Message], None]


class Calls:
    def __init__(self, worker_id: str) -> None:
        self._worker_id = worker_id
        self._open: dict[int, _Call] = {}
        self._next_request_id = 1

    def send(
        self,
        attempt: Attempt,
        link: Link | None,
        call: Message,
        answer: Callable[[Message], None],
    ) -> None:
        """Sends ``call`` of ``attempt`` on ``link`` (its lane's connection now), or
        answers it with the ERROR that says why it cannot go."""

        def refuse(code: str, text: str) -> None:
            answer({"type": "ERROR", "code": code, "message": text})

        kind = call.get("type")
        feature = CALL_FEATURES.get(str(kind))
        if feature is None:
            refuse("INVALID_REQUEST", f"{str(kind)[:40]} is not a call")
            return
        if link is None or link is not attempt.link or not link.registered:
            refuse("CONNECTION_LOST", "the attempt's connection ended")
            return
        if feature not in link.features:
            refuse("UNSUPPORTED_FEATURE", f'the coordinator does not offer "{feature}"')
            return
        waiting = sum(1 for c in self._open.values() if c.attempt is attempt)
        if waiting >= MAX_CALLS_PER_ATTEMPT:
            refuse("TOO_MANY_CALLS", f"at most {MAX_CALLS_PER_ATTEMPT} calls wait at once")
            return
        request_id = self._next_request_id
        self._next_request_id += 1
        self._open[request_id] = _Call(link, attempt, answer)
        try:
            link.send(
                {
                    **call,
                    "workerId": self._worker_id,
                    "jobId": attempt.job_id,
                    "attemptId": attempt.attempt_id,
                    "requestId": request_id,
                }
            )
        except FrameTooLargeError as err:
            del self._open[request_id]
            refuse("LIMIT_EXCEEDED", str(err))

    def settle(self, link: Link, message: Message) -> None:
        """An answer that came on ``link``: to the call it names, if that is still open there."""
        request_id = message.get("requestId")
        if not isinstance(request_id, int):
            return
        call = self._open.get(request_id)
        if call is None or call.link is not link:
            return  # its attempt ended, or it was failed when a connection ended
        del self._open[request_id]
        call.answer(message)

    def connection_lost(self, link: Link, reason: str) -> None:
        """Every call open on ``link`` is answered CONNECTION_LOST."""
        for request_id, call in list(self._open.items()):
            if call.link is link:
                del self._open[request_id]
                text = f"the connection ended first ({reason})"
                call.answer({"type": "ERROR", "code": "CONNECTION_LOST", "message": text})

    def forget(self, attempt: Attempt) -> None:
        """The attempt ended: nobody waits for the answers to its calls now."""
        for request_id, call in list(self._open.items()):
            if call.attempt is attempt:
                del self._open[request_id]
