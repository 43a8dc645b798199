"""ctx.progress on a Python worker: the job's snapshot shows it while the
handler runs, throttled to a few reports a second with the last one always
delivered and kept on the finished job; bad values raise ValueError in the
handler."""

from __future__ import annotations

import json
from pathlib import Path

from support import Cluster, until

FIXTURES = Path(__file__).parent / "fixtures"


def test_progress_reaches_the_snapshot_and_stays_on_the_finished_job(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.py_worker(c, "py-progress", tasks=FIXTURES / "py_tasks.py")
    with c.client() as client:
        held = client.submit("py.progress", {"steps": 2, "stepSeconds": 0, "holdSeconds": 30})
        running = until(
            lambda: (
                lambda j: (
                    j if (j.get("progress") or {"message": None})["message"] == "holding" else None
                )
            )(client.status(held.job_id)),
            timeout=20,
            what="progress while running",
        )
        assert running["state"] == "RUNNING"
        assert (running.get("progress") or {"fraction": None})["fraction"] == 0.5
        client.cancel(held.job_id)

        handle = client.submit("py.progress", {"steps": 40, "stepSeconds": 0.01})
        done = handle.wait(timeout=30)
        assert done["state"] == "COMPLETED"
        assert json.loads(done["result"] or "null") == {"refused": 3}
        progress = done.get("progress")
        assert progress is not None
        assert (progress["fraction"], progress["message"]) == (1, "step 40")
