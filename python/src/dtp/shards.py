"""Shards: which shard of a sharded database a queue and a job belong to, as
the coordinators compute it (docs/PROTOCOL.md, "Shards").

- A queue belongs to shard ``fnv1a32(utf8(name)) mod shards`` (FNV-1a, 32
  bits: offset basis ``0x811c9dc5``, prime ``0x01000193``); a job submitted
  without a queue is in ``default``'s shard. The hash never changes: it says
  where data lives.
- A job's id names its shard in its last three hex digits (lower case); an
  id whose last three characters are not such digits, or name a shard past
  the last, names none. With one shard every id is shard 0.
"""

from __future__ import annotations

import re

MAX_SHARDS = 1024
"""Most shards a database may have."""
DEFAULT_QUEUE = "default"
"""The queue of a job submitted without one."""

_SHARD_DIGITS = 3
_SHARD_TAIL = re.compile(r"[0-9a-f]{3}")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_FNV_OFFSET_BASIS = 0x811C9DC5
_FNV_PRIME = 0x01000193


def fnv1a32(data: bytes) -> int:
    """The 32-bit FNV-1a hash of ``data``."""
    value = _FNV_OFFSET_BASIS
    for byte in data:
        value = ((value ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return value


def shard_of_queue(queue: str | None, shards: int) -> int:
    """The shard of a queue (None: the default queue)."""
    if shards == 1:
        return 0
    name = DEFAULT_QUEUE if queue is None else queue
    # A lone surrogate has no UTF-8 form: it counts as U+FFFD, as the coordinator's does.
    return fnv1a32(_LONE_SURROGATE.sub("\ufffd", name).encode("utf-8")) % shards


def shard_of_job_id(job_id: str, shards: int) -> int | None:
    """The shard a job id names; None when it names none of ``shards``."""
    if shards == 1:
        return 0
    tail = job_id[-_SHARD_DIGITS:]
    if _SHARD_TAIL.fullmatch(tail) is None:
        return None
    shard = int(tail, 16)
    return shard if shard < shards else None
