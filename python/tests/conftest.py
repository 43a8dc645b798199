"""Fixtures: a ``cluster`` of real processes per test, stopped when it ends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support import CLI, Cluster


def pytest_sessionstart(session: pytest.Session) -> None:
    if not (CLI / "coordinator-main.js").is_file():
        raise pytest.UsageError(
            f"{CLI} has no build of the coordinator: run `npm run build` in the repository first"
        )


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.stop()
