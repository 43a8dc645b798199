"""The Python worker against a sharded coordinator.

First what it computes, checked against vectors the TypeScript functions
give (src/protocol/shards.ts, src/worker/shard-map.ts, held-list.ts): a
queue's and a job id's shard, the plan of a map, the shares of capacity.
Then a fake public worker port (fakes.FakeShardPort) that refuses the
registration with NOT_LEADER and a shard map whose worker addresses are
real, unsharded coordinators standing in for the shards' own worker ports:
the worker opens one session per address, shares its one pool among them,
and follows the map as it changes. test_sharded.py runs it against real
sharded coordinators.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from dtp.addresses import HostPort
from dtp.framing import Message, encode_frame
from dtp.shards import fnv1a32, shard_of_job_id, shard_of_queue
from dtp.worker.held import MAX_HELD_ATTEMPTS, PENDING_MAX_FRAME_BYTES, held_parts, split_held
from dtp.worker.shard_map import ShardRoute, Share, plan_shards, share_out, split_share
from fakes import FakeConn, FakeServer, FakeShardPort, shard_map
from support import HOST, Cluster, Coordinator, Proc, until

TASKS = Path(__file__).parent / "fixtures" / "py_tasks.py"

# ------------------------------------------------------- vectors from TypeScript

QUEUES = [None, "default", "emails", "alpha", "tenant-0", "tenant-7", "ünïcødé-☃", "a", "Z.z_9-x"]
QUEUE_SHARDS = {
    1: [0, 0, 0, 0, 0, 0, 0, 0, 0],
    2: [0, 0, 0, 1, 0, 1, 0, 0, 0],
    3: [0, 0, 0, 2, 0, 2, 1, 1, 0],
    4: [2, 2, 0, 3, 0, 1, 2, 0, 0],
    16: [14, 14, 12, 11, 8, 13, 2, 12, 4],
    1024: [990, 990, 92, 427, 504, 253, 770, 300, 548],
}
JOB_IDS = [
    "01a24b95-1ebf-7000-b168-bc14e5a9b00c",
    "x-00f",
    "abc",
    "x-3ff",
    "x-400",
    "x-00G",
    "x-0A1",
    "x-0a1",
    "ab",
    "",
]
JOB_SHARDS = {
    1: [0] * 10,
    16: [12, 15, None, None, None, None, None, None, None, None],
    1024: [12, 15, None, 1023, None, None, None, 161, None, None],
}


def test_a_queue_and_a_job_id_name_the_shards_the_coordinator_computes() -> None:
    for shards, expected in QUEUE_SHARDS.items():
        assert [shard_of_queue(q, shards) for q in QUEUES] == expected, shards
    for shards, expected_ids in JOB_SHARDS.items():
        assert [shard_of_job_id(i, shards) for i in JOB_IDS] == expected_ids, shards
    # A lone surrogate counts as U+FFFD; a character beyond the BMP as its four bytes.
    assert [shard_of_queue(q, 1024) for q in ("\ud800x", "😀")] == [694, 520]
    assert shard_of_queue("", 7) == 2
    assert fnv1a32(b"") == 0x811C9DC5


def test_capacity_and_prefetch_are_shared_as_the_typescript_worker_shares_them() -> None:
    cases = [
        (10, [1, 1, 1], [4, 3, 3]),
        (1, [1, 1, 1], [1, 1, 1]),
        (7, [3, 1, 2], [4, 1, 2]),
        (5, [2, 2, 1], [2, 2, 1]),
        (0, [1, 2], [1, 1]),
        (3, [], []),
        (4, [0, 0], [1, 1]),
        (9, [1, 1, 1, 1], [3, 2, 2, 2]),
    ]
    for total, weights, shares in cases:
        assert split_share(total, weights, 1) == shares, (total, weights)
    # Without the floor; remainders compared in floating point, as TypeScript does.
    floorless = [
        (10, [1, 1, 1], [4, 3, 3]),
        (0, [1, 2], [0, 0]),
        (8, [3, 1], [6, 2]),
        (2, [1, 7, 2], [0, 1, 1]),
        (2, [4, 1, 1], [1, 1, 0]),
        (2, [1, 3, 10], [0, 0, 2]),
    ]
    for total, weights, shares in floorless:
        assert split_share(total, weights, 0) == shares, (total, weights)

    def routes(*shards: tuple[int, ...]) -> list[ShardRoute]:
        return [ShardRoute(f"h:{n}", HostPort("h", n), s) for n, s in enumerate(shards, 1)]

    assert share_out(3, 6, routes((0, 2), (1,))) == [Share(2, 4), Share(1, 2)]
    assert share_out(1, 0, routes((0,), (1,))) == [Share(1, 0), Share(1, 0)]
    assert share_out(2000, 4000, routes((0,), (1,))) == [Share(1000, 2000), Share(1000, 2000)]
    assert share_out(1, 4, routes((0,), (1,), (2,))) == [Share(1, 2), Share(1, 1), Share(1, 1)]


def test_a_map_is_planned_as_the_typescript_worker_plans_it() -> None:
    infos = shard_map(["h:1", "h:2", "h:1", None])
    plan = plan_shards(infos, None, 7070)
    assert plan is not None
    assert (plan.count, plan.served, plan.unled) == (4, (0, 1, 2, 3), (3,))
    assert [(r.address, r.shards) for r in plan.routes] == [("h:1", (0, 2)), ("h:2", (1,))]
    # Only the shards of its queues; an address without a port takes the default one.
    queues = ["alpha", "tenant-0", "emails"]
    plan = plan_shards(shard_map(["h:1", "h:2", "h:1", "h"]), queues, 7070)
    assert plan is not None
    assert (plan.served, plan.unled) == ((0, 3), ())
    assert [(r.address, r.shards) for r in plan.routes] == [("h:1", (0,)), ("h:7070", (3,))]
    # IPv6, odd addresses, shards out of range and entries that are no shard at all.
    odd = [
        {"shard": 0, "workerAddress": "[::1]:5"},
        {"shard": 1, "workerAddress": "::1"},
        {"shard": 2, "workerAddress": "bad:port:x:"},
        {"shard": 5000, "workerAddress": "h:1"},
        {"shard": -1, "workerAddress": "h:1"},
        {"shard": True, "workerAddress": "h:1"},
        {"shard": "3", "workerAddress": "h:1"},
        "shard 4",
    ]
    plan = plan_shards(odd, None, 7070)
    assert plan is not None
    assert [(r.address, r.shards) for r in plan.routes] == [
        ("[::1]:5", (0,)),
        ("[::1]:7070", (1,)),
        ("[bad:port:x:]:7070", (2,)),
    ]
    assert plan_shards([], None, 7070) is None
    assert plan_shards([{"shard": 1, "workerAddress": 7}], None, 7070) is not None


def test_held_attempts_fit_the_registration_frame_and_the_rest_go_in_parts() -> None:
    register = {"type": "WORKER_REGISTER", "workerId": "w", "capacity": 4}
    few = [{"jobId": f"j{n}", "attemptId": f"a{n}"} for n in range(3)]
    assert split_held(register, few) == (few, [])
    uuid = "01a24b95-1ebf-7000-b168-bc14e5a9b00c"
    many = [{"jobId": uuid, "attemptId": uuid} for _ in range(3000)]
    listed, rest = split_held(register, many)
    assert len(listed) + len(rest) == 3000 and 1000 < len(listed) < 1310
    assert len(encode_frame({**register, "heldAttempts": listed})) < PENDING_MAX_FRAME_BYTES
    short = [{"jobId": "j", "attemptId": "a"} for _ in range(6000)]
    listed, rest = split_held(register, short)
    assert 4000 < len(listed) <= MAX_HELD_ATTEMPTS and listed + rest == short
    assert held_parts([]) == [[]]
    assert [len(part) for part in held_parts(short)] == [2000, 2000, 2000]


# ------------------------------------------------ against stand-ins for the shards


def stand_in(cluster: Cluster, *args: str) -> Coordinator:
    """A real unsharded coordinator standing in for one shard's worker port (slow to
    judge a worker lost: a loaded machine must not make these tests about heartbeats)."""
    return cluster.coordinator(
        "--heartbeat-timeout-millis",
        "10000",
        "--sweep-interval-millis",
        "50",
        "--retry-base-delay-millis",
        "50",
        *args,
        fast=False,
    )


def address(c: Coordinator) -> str:
    return f"{HOST}:{c.worker_port}"


@pytest.fixture
def public_port() -> Iterator[list[FakeShardPort]]:
    made: list[FakeShardPort] = []
    yield made
    for fake in made:
        fake.stop()


def sharded_worker(
    cluster: Cluster,
    fake: FakeShardPort,
    worker_id: str,
    *args: str,
    capacity: int,
    refresh_ms: int = 50,
    env: dict[str, str] | None = None,
) -> Proc:
    return cluster.py_worker(
        None,
        worker_id,
        "--coordinator-host",
        f"{HOST}:{fake.port}",
        "--shard-refresh-millis",
        str(refresh_ms),
        *args,
        tasks=TASKS,
        capacity=capacity,
        wait=False,
        env=env,
    )


def registered_with(c: Coordinator, worker_id: str, capacity: int, after: int = 0) -> None:
    """Waits for ``c`` to log the worker's registration with ``capacity``."""
    c.proc.wait_for(
        rf"worker registered workerId={re.escape(worker_id)} capacity={capacity}\b", 30, after
    )


def registrations(c: Coordinator, worker_id: str) -> int:
    return len(re.findall(rf"worker registered workerId={re.escape(worker_id)}\b", c.proc.output))


def test_goes_sharded_when_refused_with_the_map_and_works_on_every_shard(
    cluster: Cluster, public_port: list[FakeShardPort]
) -> None:
    tokens = cluster.write("worker.tokens", "shard-token\n")
    a, b = (stand_in(cluster, "--worker-token-file", str(tokens)) for _ in range(2))
    fake = FakeShardPort(shard_map([address(a), address(b), address(a)]))
    public_port.append(fake)
    worker = sharded_worker(cluster, fake, "py-sh", capacity=3, env={"DTP_TOKEN": "shard-token"})
    # Capacity 3 split by shards led: a leads two of the three, b one.
    registered_with(a, "py-sh", 2)
    registered_with(b, "py-sh", 1)
    worker.wait_for(r"sharded coordinator: one session per shard leader .*shards=3")
    worker.wait_for(rf"registered coordinator={address(a)} capacity=2 .*shards=0,2")
    worker.wait_for(rf"registered coordinator={address(b)} capacity=1 .*shards=1")
    # The map is asked for again with the worker token, as the registration carried it.
    until(lambda: len(fake.list_requests) >= 2, 30, "the map asked for again")
    assert fake.list_requests[0] == {"type": "LIST_SHARDS", "authToken": "shard-token"}
    assert len(fake.registrations) == 1 and fake.registrations[0]["authToken"] == "shard-token"
    for c in (a, b):
        with c.client() as client:
            job = client.submit("py.upper", {"text": f"on {c.worker_port}"})
            assert job.result(timeout=30) == f"ON {c.worker_port}"
            assert [a["workerId"] for a in client.attempts(job.job_id)] == ["py-sh"]
    # Still one registration each: nothing moved, so nothing registered again.
    assert (registrations(a, "py-sh"), registrations(b, "py-sh")) == (1, 1)


def test_one_pool_for_every_session_never_more_at_once_than_its_capacity(
    cluster: Cluster, public_port: list[FakeShardPort]
) -> None:
    a, b = stand_in(cluster), stand_in(cluster)
    fake = FakeShardPort(shard_map([address(a), address(b)]))
    public_port.append(fake)
    # Capacity 1 over two sessions: each registers 1, the pool runs one at a time.
    worker = sharded_worker(
        cluster, fake, "py-one", "--prefetch", "0", "--processes", "1", capacity=1
    )
    registered_with(a, "py-one", 1)
    registered_with(b, "py-one", 1)
    with a.client() as ca, b.client() as cb:
        jobs = [
            ca.submit("py.sleep", {"seconds": 0.4}),
            cb.submit("py.sleep", {"seconds": 0.4}),
        ]
        for job in jobs:
            assert job.wait(timeout=30)["state"] == "COMPLETED"
    events = re.findall(r"task (started|finished) jobId=(\S+)", worker.output)
    assert len(events) == 4, events
    # The second started only once the first had finished: one slot for both sessions.
    assert [kind for kind, _ in events] == ["started", "finished", "started", "finished"]
    assert events[0][1] == events[1][1] and events[2][1] == events[3][1]


def test_opens_sessions_only_to_the_shards_of_its_queues(
    cluster: Cluster, public_port: list[FakeShardPort]
) -> None:
    a, b = stand_in(cluster), stand_in(cluster)
    mine = shard_of_queue("alpha", 4)
    fake = FakeShardPort(shard_map([address(a) if n == mine else address(b) for n in range(4)]))
    public_port.append(fake)
    sharded_worker(cluster, fake, "py-alpha", "--queues", "alpha", capacity=2)
    registered_with(a, "py-alpha", 2)
    # A few refreshes later it still has not gone to b.
    asked = len(fake.list_requests)
    until(lambda: len(fake.list_requests) >= asked + 3, 30, "three more refreshes")
    assert registrations(b, "py-alpha") == 0
    with a.client() as client:
        job = client.submit("SLEEP", {"durationMillis": 1}, queue="alpha")
        assert job.wait(timeout=30)["state"] == "COMPLETED"


def test_follows_a_shard_that_moves_carrying_running_attempts_over(
    cluster: Cluster, public_port: list[FakeShardPort]
) -> None:
    a, b = stand_in(cluster), stand_in(cluster)
    fake = FakeShardPort(shard_map([address(a), address(a)]))
    public_port.append(fake)
    worker = sharded_worker(cluster, fake, "py-move", capacity=2)
    registered_with(a, "py-move", 2)
    with a.client() as ca:
        first = ca.submit("py.sleep", {"seconds": 1.5})
        worker.wait_for(rf"task started jobId={first.job_id} ")

        # Shard 1 moves to b: a session with b, and a registers again with its smaller
        # share beside its old connection, so the attempt running there carries over.
        mark = len(a.proc.output)
        fake.set_map([address(a), address(b)])
        registered_with(b, "py-move", 1)
        registered_with(a, "py-move", 1, after=mark)
        worker.wait_for(r"new share of capacity or queues: registering again")
        worker.wait_for(r"running tasks carried over to the new session tasks=1")
        carried = first.wait(timeout=30)
        assert (carried["state"], carried["attempts"]) == ("COMPLETED", 1), carried

        # a leads none of our shards any more while an attempt runs there: it finishes
        # and reports on a's session, which then closes; b registers again with all of it.
        running = ca.submit("py.sleep", {"seconds": 1.0})
        worker.wait_for(rf"task started jobId={running.job_id} ")
        mark_b = len(b.proc.output)
        fake.set_map([address(b), address(b)])
        worker.wait_for(r"session draining: its coordinator leads none of this worker's shards")
        done = running.wait(timeout=30)
        assert (done["state"], done["attempts"]) == ("COMPLETED", 1), done
        assert [x["workerId"] for x in ca.attempts(running.job_id)] == ["py-move"]
        worker.wait_for(rf"session closed coordinator={address(a)}")
        registered_with(b, "py-move", 2, after=mark_b)
    with b.client() as cb:
        assert cb.submit("py.upper", {"text": "b"}).result(timeout=30) == "B"


def test_asks_for_the_map_at_once_when_a_session_loses_its_connection(
    cluster: Cluster, public_port: list[FakeShardPort]
) -> None:
    a, b = stand_in(cluster), stand_in(cluster)
    fake = FakeShardPort(shard_map([address(a), address(b)]))
    public_port.append(fake)
    # No periodic refresh within the test: only the lost session makes it ask.
    worker = sharded_worker(cluster, fake, "py-lost", capacity=2, refresh_ms=600_000)
    registered_with(a, "py-lost", 1)
    registered_with(b, "py-lost", 1)
    asked = len(fake.list_requests)
    mark = len(b.proc.output)
    fake.set_map([address(b), address(b)])
    a.proc.stop()
    registered_with(b, "py-lost", 2, after=mark)
    assert len(fake.list_requests) > asked
    worker.wait_for(r"connection lost coordinator=")


def test_a_shard_session_lists_what_it_holds_when_it_registers_again(
    cluster: Cluster, public_port: list[FakeShardPort]
) -> None:
    shard = FakeServer()  # one shard's own worker port, spoken for by the test
    try:
        fake = FakeShardPort(shard_map([f"{HOST}:{shard.port}"]))
        public_port.append(fake)
        worker = sharded_worker(cluster, fake, "py-held", "--processes", "1", capacity=1400)
        features = ["slots", "prefetch", "reattach", "moreHeld"]
        conn, hello = registered(shard, features)
        assert (hello["capacity"], hello["slots"], hello["heldAttempts"]) == (1024, 1400, [])
        uuid = "01a24b95-1ebf-7000-b168-bc14e5a9b"
        held = [
            {"jobId": f"{uuid}{n:03x}", "attemptId": f"{uuid}{n + 2048:03x}"} for n in range(1400)
        ]
        for h in held:
            conn.send(assign(h, "SLEEP", {"durationMillis": 120_000}))
        worker.wait_for(rf"task started jobId={held[-1]['jobId']} ", 60)

        # The connection ends; the attempts run on. The next registration lists as many
        # as its frame holds, the rest follow in HELD_ATTEMPTS, and they carry over.
        conn.close()
        conn, hello = registered(shard, features)
        listed = hello["heldAttempts"]
        assert hello["moreHeld"] is True and 1000 < len(listed) < len(held)
        parts: list[Message] = []
        while not parts or parts[-1]["more"]:
            part = conn.recv()
            assert part is not None and part["type"] == "HELD_ATTEMPTS", part
            parts.append(part)
        rest = [h for part in parts for h in part["heldAttempts"]]
        assert listed + rest == held
        worker.wait_for(r"running tasks carried over to the new session tasks=1400")

        # A coordinator without moreHeld revoked the unlisted ones: they are let go.
        conn.close()
        conn, hello = registered(shard, ["slots", "prefetch", "reattach"])
        assert hello["heldAttempts"] == listed and hello["moreHeld"] is True
        worker.wait_for(rf"the unlisted ones are let go unlisted={len(held) - len(listed)}\b", 30)
        conn.close()
        conn, hello = registered(shard, features)
        assert hello["heldAttempts"] == listed and "moreHeld" not in hello
    finally:
        shard.stop()


def registered(server: FakeServer, features: list[str]) -> tuple[FakeConn, Message]:
    """The next connection's WORKER_REGISTER, answered WORKER_REGISTERED with ``features``."""
    conn = server.next_connection()
    hello = conn.recv()
    assert hello is not None and hello["type"] == "WORKER_REGISTER", hello
    conn.send({"type": "WORKER_REGISTERED", "workerId": hello["workerId"], "features": features})
    return conn, hello


def assign(held: Message, task_type: str, payload: Message) -> Message:
    return {
        "type": "TASK_ASSIGN",
        **held,
        "attemptNumber": 1,
        "taskType": task_type,
        "payload": payload,
    }
