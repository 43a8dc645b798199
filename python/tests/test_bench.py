"""The benchmark runs (at a size that means nothing: its figures are in
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
