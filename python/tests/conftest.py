"""Fixtures: a ``cluster`` of real processes per test, stopped when it ends.

``DTP_PYTEST_PART=k/n`` runs only every n-th test from the k-th on, in the
order collected (scripts/python-checks.sh runs the parts side by side).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import CLI, Cluster


def pytest_sessionstart(session: pytest.Session) -> None:
    if not (CLI / "coordinator-main.js").is_file():
        raise pytest.UsageError(
            f"{CLI} has no build of the coordinator: run `npm run build` in the repository first"
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    part = os.environ.get("DTP_PYTEST_PART", "")
    if not part:
        return
    k, _, n = part.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise pytest.UsageError(f"DTP_PYTEST_PART={part!r}: expected k/n with 1 <= k <= n")
    mine = [i % int(n) == int(k) - 1 for i in range(len(items))]
    config.hook.pytest_deselected(items=[item for item, m in zip(items, mine) if not m])
    items[:] = [item for item, m in zip(items, mine) if m]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.stop()
