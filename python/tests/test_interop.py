"""The Python worker and client beside the TypeScript ones: the CLI's jobs on
a Python worker, the Python client's jobs on a TypeScript worker, and a mixed
pool that routes each task type to the workers that declared it."""

from __future__ import annotations

import json
from pathlib import Path

from support import Cluster

FIXTURES = Path(__file__).parent / "fixtures"


def test_typescript_cli_to_python_worker(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.py_worker(c, "py-for-cli", tasks=FIXTURES / "py_tasks.py")
    submitted = cluster.cli(
        c, "submit", "py.value", "--payload", json.dumps({"value": {"from": "cli", "n": [1, 2]}})
    )
    done = cluster.cli(c, "wait", submitted["jobId"], "--timeout-millis", "30000")
    job = done.get("job", done)
    assert (job["state"], job["resultFormat"]) == ("COMPLETED", "json")
    assert json.loads(job["result"]) == {"from": "cli", "n": [1, 2]}
    text = cluster.cli(c, "submit", "py.upper", "--payload", '{"text": "ünïcode"}')
    job = cluster.cli(c, "wait", text["jobId"], "--timeout-millis", "30000")
    assert job.get("job", job)["result"] == "ÜNÏCODE"


def test_python_client_to_typescript_worker(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.ts_worker(c, "ts-for-py", tasks=FIXTURES / "ts_tasks.mjs")
    with c.client() as client:
        assert client.submit("ts.reverse", {"text": "dtp"}).result(timeout=30) == {
            "reversed": "ptd"
        }
        assert client.submit("SLEEP", {"durationMillis": 10}).result(timeout=30) == "slept 10 ms"


def test_a_mixed_pool_routes_each_type_to_its_workers(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.ts_worker(c, "ts-1", tasks=FIXTURES / "ts_tasks.mjs", capacity=2)
    cluster.py_worker(c, "py-1", tasks=FIXTURES / "py_tasks.py", capacity=2)
    cluster.py_worker(c, "py-2", tasks=FIXTURES / "py_tasks.py", capacity=2)
    with c.client() as client:
        jobs = [(client.submit(t, {}), t) for _ in range(8) for t in ("ts.where", "py.where")]
        for handle, task_type in jobs:
            expected = "typescript" if task_type == "ts.where" else "python"
            assert handle.result(timeout=30) == expected
            worker = client.attempts(handle.job_id)[0]["workerId"]
            assert worker.startswith("ts-" if expected == "typescript" else "py-"), (
                task_type,
                worker,
            )
