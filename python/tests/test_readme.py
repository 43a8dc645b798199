"""README's "Workers in Python", run as written: the commands from an empty
folder (a venv, pip install of this package), its task module, a worker and
the one-line client, against a coordinator of this checkout; and the examples
of python/README.md, each with the command lines it shows."""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

from support import HOST, ROOT, Cluster


def section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## Workers in Python")
    return text[start : text.index("\n## ", start + 1)]


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def test_the_readme_example_runs_as_written(cluster: Cluster) -> None:
    readme = section()
    setup, run = blocks(readme, "sh")
    (module,) = blocks(readme, "python")
    c = cluster.coordinator()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DTP_", "VIRTUAL_ENV"))}
    # pip would spend minutes retrying an index it cannot reach; the command stays as written.
    env.update(PIP_RETRIES="0", PIP_DISABLE_PIP_VERSION_CHECK="1")
    script = setup.replace("/path/to/dtp", str(ROOT))
    done = subprocess.run(
        ["bash", "-euc", script],
        cwd=cluster.dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    folder = cluster.dir / "py-tasks"
    (folder / "tasks.py").write_text(module, encoding="utf-8")

    worker_line, client_line = [line for line in run.splitlines() if line.strip()]
    activate = f". {folder}/.venv/bin/activate && "
    worker_command = worker_line.split("&")[0].strip()
    assert worker_command == "python -m dtp.worker --tasks tasks.py"
    cluster.dir = folder
    cluster.start(
        "readme-worker",
        ["bash", "-c", activate + "exec " + worker_command],
        env={"DTP_COORDINATOR_HOST": HOST, "DTP_COORDINATOR_PORT": str(c.worker_port)},
    )
    c.proc.wait_for(r"worker registered workerId=worker-[0-9a-f]{8} .*text\.shout", 60)
    client = subprocess.run(
        ["bash", "-c", activate + client_line],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**env, "DTP_HOST": HOST, "DTP_PORT": str(c.client_port)},
    )
    assert client.returncode == 0, client.stderr
    printed = re.search(r"The last line prints `([^`]+)`", readme)
    assert printed is not None
    assert client.stdout.strip() == printed.group(1)


def test_the_package_readme_worker_line_runs_as_written(cluster: Cluster) -> None:
    """python/README.md's "Run a worker" line, its example host name standing for
    this machine's loopback (the port comes from DTP_COORDINATOR_PORT), with the
    task module of README.md's "Workers in Python"."""
    text = (ROOT / "python" / "README.md").read_text(encoding="utf-8")
    start = text.index("## Run a worker")
    (block,) = blocks(text[start : text.index("\n## ", start + 1)], "sh")
    (line,) = [line for line in block.splitlines() if line.strip()]
    assert "coordinator.example" in line
    (module,) = blocks(section(), "python")
    (cluster.dir / "tasks.py").write_text(module, encoding="utf-8")
    c = cluster.coordinator()
    # `python` is the interpreter running these tests, where the package is installed.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    cluster.start(
        "package-readme-worker",
        ["bash", "-c", "exec " + line.replace("coordinator.example", HOST)],
        env={"PATH": path, "DTP_COORDINATOR_PORT": str(c.worker_port)},
    )
    c.proc.wait_for(r"worker registered workerId=worker-[0-9a-f]{8} capacity=4 .*text\.shout", 60)
    with c.client() as client:
        assert client.submit("text.shout", {"text": "hi"}).result(timeout=30) == {"text": "HI!"}


def package_section(title: str) -> str:
    text = (ROOT / "python" / "README.md").read_text(encoding="utf-8")
    start = text.index(f"## {title}\n")
    return text[start : text.index("\n## ", start + 1)]


def test_the_package_readme_durable_handlers_and_client_examples_run_as_written(
    cluster: Cluster,
) -> None:
    """python/README.md's workflows.py with its worker line, then client.py and
    async_client.py with their command lines, each printing what the README says."""
    durable = package_section("Durable handlers, children and parents")
    (module,) = blocks(durable, "python")
    (worker_block,) = blocks(durable, "sh")
    (worker_line,) = [line for line in worker_block.splitlines() if line.strip()]
    usage = package_section("Use the client")
    _, client_code, async_code = blocks(usage, "python")
    client_line, async_line = (block.strip() for block in blocks(usage, "sh"))
    (printed,) = blocks(usage, "text")
    async_printed = re.search(r"It prints `([^`]+)`", usage)
    assert async_printed is not None
    assert (client_line, async_line) == ("python client.py", "python async_client.py")

    (cluster.dir / "workflows.py").write_text(module, encoding="utf-8")
    (cluster.dir / "client.py").write_text(client_code, encoding="utf-8")
    (cluster.dir / "async_client.py").write_text(async_code, encoding="utf-8")
    c = cluster.coordinator()
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    cluster.start(
        "readme-durable-worker",
        ["bash", "-c", "exec " + worker_line],
        env={
            "PATH": path,
            "DTP_COORDINATOR_HOST": HOST,
            "DTP_COORDINATOR_PORT": str(c.worker_port),
        },
    )
    c.proc.wait_for(r"worker registered workerId=worker-[0-9a-f]{8} .*orders\.fulfil", 60)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DTP_")}
    env.update(PATH=path, DTP_HOST=HOST, DTP_PORT=str(c.client_port))
    for line, expected in ((client_line, printed), (async_line, async_printed.group(1))):
        done = subprocess.run(
            ["bash", "-c", line],
            cwd=cluster.dir,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == expected.strip(), done.stdout


class _RateLimitedApi(http.server.BaseHTTPRequestHandler):
    """A service that answers its first request 429 (``Retry-After: 1``), then
    ``{"report": 7}``."""

    requests: ClassVar[list[float]] = []

    def do_GET(self) -> None:
        self.requests.append(time.monotonic())
        if len(self.requests) == 1:
            self.send_response(429)
            self.send_header("Retry-After", "1")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"report": 7}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_the_package_readme_rate_limit_example_runs_as_written(cluster: Cluster) -> None:
    """python/README.md's api_tasks.py and fetch.py with their command lines, the
    service at api.example standing in on this machine: the second submission is
    deduplicated, the 429 puts the job off without using an attempt, and the script
    prints what the README says."""
    usage = package_section("Deduplicate, expire, back off")
    module, client_code = blocks(usage, "python")
    worker_block, client_block = (block.strip() for block in blocks(usage, "sh"))
    (printed,) = blocks(usage, "text")
    assert worker_block == "python -m dtp.worker --tasks api_tasks.py"
    assert client_block.startswith("python fetch.py https://api.example/")
    (cluster.dir / "api_tasks.py").write_text(module, encoding="utf-8")
    (cluster.dir / "fetch.py").write_text(client_code, encoding="utf-8")

    _RateLimitedApi.requests = []
    api = http.server.ThreadingHTTPServer((HOST, 0), _RateLimitedApi)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    try:
        c = cluster.coordinator()
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        cluster.start(
            "readme-api-worker",
            ["bash", "-c", "exec " + worker_block],
            env={
                "PATH": path,
                "DTP_COORDINATOR_HOST": HOST,
                "DTP_COORDINATOR_PORT": str(c.worker_port),
                "NO_PROXY": HOST,
                "no_proxy": HOST,
            },
        )
        c.proc.wait_for(r"worker registered workerId=worker-[0-9a-f]{8} .*api\.fetch", 60)
        env = {k: v for k, v in os.environ.items() if not k.startswith("DTP_")}
        env.update(PATH=path, DTP_HOST=HOST, DTP_PORT=str(c.client_port))
        line = client_block.replace("https://api.example", f"http://{HOST}:{api.server_port}")
        done = subprocess.run(
            ["bash", "-c", line],
            cwd=cluster.dir,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == printed.strip(), done.stdout
        first, second = _RateLimitedApi.requests
        assert second - first >= 0.9  # Retry-After: 1
        with c.client() as client:
            (job,) = list(client.list(task_type="api.fetch"))  # one: the second was deduplicated
        assert (job["state"], job["dedupKey"]) == ("COMPLETED", line.split()[-1])
    finally:
        api.shutdown()
        api.server_close()


def test_the_package_readme_signals_example_runs_as_written(cluster: Cluster) -> None:
    """python/README.md's approvals.py with its worker line, then approve.py with its
    command line: a signal answers one job, an event with a key wakes another, a trigger
    makes a job of an event, and an event id published twice does nothing the second
    time; it prints what the README says."""
    usage = package_section("Signals, events and triggers")
    module, client_code = blocks(usage, "python")
    worker_block, client_block = (block.strip() for block in blocks(usage, "sh"))
    (printed,) = blocks(usage, "text")
    assert (worker_block, client_block) == (
        "python -m dtp.worker --tasks approvals.py",
        "python approve.py",
    )
    (cluster.dir / "approvals.py").write_text(module, encoding="utf-8")
    (cluster.dir / "approve.py").write_text(client_code, encoding="utf-8")
    c = cluster.coordinator()
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    cluster.start(
        "readme-signals-worker",
        ["bash", "-c", "exec " + worker_block],
        env={
            "PATH": path,
            "DTP_COORDINATOR_HOST": HOST,
            "DTP_COORDINATOR_PORT": str(c.worker_port),
        },
    )
    c.proc.wait_for(r"worker registered workerId=worker-[0-9a-f]{8} .*expenses\.review", 60)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DTP_")}
    env.update(PATH=path, DTP_HOST=HOST, DTP_PORT=str(c.client_port))
    done = subprocess.run(
        ["bash", "-c", client_block],
        cwd=cluster.dir,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == printed.strip(), done.stdout
