"""The benchmarks run (at a size that means nothing: their figures are in
docs/MEASURED_BEHAVIOR.md, measured at full size)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "throughput.py"


def test_the_throughput_benchmark_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--jobs", "20", "--runs", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\| python \| [\d,]+ \|", done.stdout), done.stdout
    assert re.search(r"Python / TypeScript: \d+\.\d\d", done.stdout)
    assert re.search(r"through a task process \(pipe out and back\) \| [\d,]+ \|", done.stdout)


MANY = BENCH.parent / "many_attempts.py"


def test_the_many_attempts_benchmark_runs() -> None:
    done = subprocess.run(
        [
            *[sys.executable, str(MANY), "--jobs", "40", "--capacity", "20"],
            *["--seconds", "0.2", "--processes", "2"],
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    figures = re.search(r"\| ([\d,]+) MB \| ([\d,]+) MB \| (\d+) \| [\d.]+ s", done.stdout)
    assert figures is not None, done.stdout
    assert 0 < int(figures.group(2)) <= int(figures.group(1).replace(",", ""))
    assert 1 <= int(figures.group(3)) <= 3  # the two shared task processes, not one per attempt
