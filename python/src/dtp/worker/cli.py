"""The command line of ``python -m dtp.worker``.

Flags and defaults are those of the TypeScript worker (``scripts/worker.sh``),
and each may also come from the environment (``--coordinator-port`` <->
``DTP_COORDINATOR_PORT``; an explicit flag wins, an empty variable is unset).
``DTP_TOKEN`` holds a token itself when no ``--token-file`` is given.

Exit codes: 0 after SIGTERM/SIGINT (the worker drains first), 1 when the
coordinator refused it (token, certificate, TLS, its id taken over), 2 for a
usage error or a task module that cannot be used.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import secrets
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Callable

from .. import logs
from ..addresses import AddressError, parse_address_list
from ..protocol import (
    BUILTIN_TASK_TYPES,
    MAX_PREFETCH_PER_SLOT,
    MAX_TASK_TYPES_PER_WORKER,
    MAX_WORKER_ID_LENGTH,
)
from ..security import SecurityConfigError, client_tls, read_token_file, token_from_env
from .options import BOUNDS, WorkerOptions, queues_problem
from .pool import TaskPool, default_processes
from .worker import Worker

PROG = "python -m dtp.worker"
log = logging.getLogger("dtp.worker")


class UsageError(Exception):
    pass


def _env_name(flag: str) -> str:
    return "DTP_" + flag.upper().replace("-", "_")


def _int_in(flag: str, option: str) -> Callable[[str], int]:
    """The parser of an integer flag, within its option's bounds (options.BOUNDS)."""
    low, high = BOUNDS[option]

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"--{flag} must be an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"--{flag} must be in {low}..{high}, got {value}")
        return value

    return parse


_FLAGS: list[dict[str, Any]] = [
    {
        "flag": "tasks",
        "metavar": "FILE.py|MODULE",
        "action": "append",
        "help": "task module to load beside the built-ins: a file path or a module name on the "
        "import path (repeat or separate with commas)",
    },
    {
        "flag": "coordinator-host",
        "default": "localhost",
        "metavar": "H1[:P1],H2[:P2]",
        "help": "coordinator's host, or several coordinators sharing PostgreSQL (the worker "
        "finds the leader)",
    },
    {
        "flag": "coordinator-port",
        "default": "7070",
        "type": _int_in("coordinator-port", "coordinator_port"),
        "help": "coordinator's worker port",
    },
    {
        "flag": "id",
        "metavar": "ID",
        "help": "worker id, unique among live workers (default: worker-<8 random hex>)",
    },
    {
        "flag": "capacity",
        "default": "4",
        "type": _int_in("capacity", "capacity"),
        "help": "attempts run at once, shared and isolated together (above 1024 with a "
        "coordinator that offers slots)",
    },
    {
        "flag": "processes",
        "type": _int_in("processes", "processes"),
        "help": "task processes that run the shared attempts (async def handlers), many each "
        f"(default: the CPU count, {default_processes()} here)",
    },
    {
        "flag": "prefetch",
        "type": _int_in("prefetch", "prefetch"),
        "help": "attempts taken beyond capacity and queued here, used by the coordinator only "
        "while attempts are short; 0..4 x capacity (default 2 x capacity; 0 turns it off)",
    },
    {
        "flag": "heartbeat-interval-millis",
        "default": "2000",
        "type": _int_in("heartbeat-interval-millis", "heartbeat_interval_ms"),
        "help": "time between heartbeats",
    },
    {
        "flag": "reconnect-delay-millis",
        "default": "2000",
        "type": _int_in("reconnect-delay-millis", "reconnect_delay_ms"),
        "help": "wait before dialling again after a lost connection (doubling while the "
        "coordinator stays away, up to 16 x, at most 30 s)",
    },
    {
        "flag": "drain-timeout-millis",
        "default": "30000",
        "type": _int_in("drain-timeout-millis", "drain_timeout_ms"),
        "help": "on SIGINT/SIGTERM, time running tasks get to finish before they are released",
    },
    {
        "flag": "cancel-grace-millis",
        "default": "1000",
        "type": _int_in("cancel-grace-millis", "cancel_grace_ms"),
        "help": "after a cancel or deadline, time a task gets to stop before its process is killed",
    },
    {
        "flag": "coordinator-timeout-millis",
        "type": _int_in("coordinator-timeout-millis", "coordinator_timeout_ms"),
        "help": "a coordinator that confirmed heartbeat acks and is silent this long is dropped "
        "and redialled (default 3 x heartbeat interval, at least 1000)",
    },
    {
        "flag": "shard-refresh-millis",
        "default": "2000",
        "type": _int_in("shard-refresh-millis", "shard_refresh_ms"),
        "help": "with a sharded coordinator, how often the worker asks it where its shards' "
        "leaders are (and at once when a shard session is lost)",
    },
    {
        "flag": "queues",
        "metavar": "A,B",
        "help": "take attempts of these named queues only (default: every queue); needs a "
        "coordinator that offers queues, else the worker stops",
    },
    {"flag": "tls", "action": "store_true", "help": "connect with TLS, trusting the system CAs"},
    {"flag": "tls-ca", "metavar": "PEM", "help": "trust this CA instead (implies --tls)"},
    {
        "flag": "tls-cert",
        "metavar": "PEM",
        "help": "present this client certificate (with --tls-key; implies --tls)",
    },
    {"flag": "tls-key", "metavar": "PEM", "help": "key of --tls-cert"},
    {
        "flag": "token-file",
        "metavar": "FILE",
        "help": "file whose first token is the worker token (default: env DTP_TOKEN)",
    },
    {
        "flag": "log-level",
        "default": "info",
        "choices": ["debug", "info", "warn", "error"],
        "help": "info: a line per task event; warn: only trouble",
    },
    {
        "flag": "log-format",
        "default": "text",
        "choices": ["text", "json"],
        "help": "log lines as key=value text or JSON",
    },
]


def _parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Runs a dtp worker in Python: registers with a coordinator and runs the "
        "tasks it assigns in child processes: async def handlers many at once in a few "
        "shared processes, def handlers each in a process of its own.",
        epilog="Every flag may also come from the environment: --capacity <-> DTP_CAPACITY.",
    )
    for spec in _FLAGS:
        spec = dict(spec)
        flag = spec.pop("flag")
        from_env = env.get(_env_name(flag), "").strip()
        if spec.get("action") == "store_true":
            spec["default"] = from_env.lower() in ("1", "true", "yes")
        elif spec.get("action") == "append":
            spec["default"] = None
        elif from_env:
            spec["default"] = from_env
        parser.add_argument(f"--{flag}", **spec)
    return parser


def parse_args(argv: Sequence[str], env: Mapping[str, str]) -> argparse.Namespace:
    parser = _parser(env)
    args = parser.parse_args(list(argv))
    if args.tasks is None:
        from_env = env.get("DTP_TASKS", "").strip()
        args.tasks = [from_env] if from_env else []
    args.tasks = [m.strip() for value in args.tasks for m in value.split(",") if m.strip()]
    for name in (
        "coordinator_port",
        "capacity",
        "heartbeat_interval_millis",
        "reconnect_delay_millis",
        "drain_timeout_millis",
        "cancel_grace_millis",
        "shard_refresh_millis",
    ):
        value = getattr(args, name)
        if isinstance(value, str):  # a default from the environment, not yet parsed
            flag = name.replace("_", "-")
            try:
                setattr(args, name, _FLAGS_BY_NAME[flag]["type"](value))
            except argparse.ArgumentTypeError as err:
                parser.error(f"{err} (from {_env_name(flag)})")
    for name in ("prefetch", "processes", "coordinator_timeout_millis"):
        value = getattr(args, name)
        if isinstance(value, str):
            flag = name.replace("_", "-")
            try:
                setattr(args, name, _FLAGS_BY_NAME[flag]["type"](value))
            except argparse.ArgumentTypeError as err:
                parser.error(f"{err} (from {_env_name(flag)})")
    if args.prefetch is not None and args.prefetch > MAX_PREFETCH_PER_SLOT * args.capacity:
        parser.error(
            f"--prefetch must be at most {MAX_PREFETCH_PER_SLOT} x --capacity "
            f"({MAX_PREFETCH_PER_SLOT * args.capacity}), got {args.prefetch}"
        )
    if args.queues is not None:
        args.queues = [q.strip() for q in args.queues.split(",") if q.strip()]
        problem = queues_problem(args.queues)
        if problem is not None:
            parser.error(f"--queues {problem}")
    if args.id is None:
        args.id = f"worker-{secrets.token_hex(4)}"
    if not args.id.strip() or len(args.id) > MAX_WORKER_ID_LENGTH:
        parser.error(f"--id must not be blank and at most {MAX_WORKER_ID_LENGTH} characters")
    try:
        parse_address_list(args.coordinator_host, args.coordinator_port)
    except AddressError as err:
        parser.error(f"--coordinator-host: {err}")
    return args


_FLAGS_BY_NAME = {spec["flag"]: spec for spec in _FLAGS}


def _usage_exit(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    args = parse_args(sys.argv[1:] if argv is None else argv, env)
    level = logs.setup(args.log_level, args.log_format)
    try:
        tls = (
            client_tls(args.tls_ca, args.tls_cert, args.tls_key)
            if args.tls or args.tls_ca or args.tls_cert or args.tls_key
            else None
        )
        token = read_token_file(args.token_file) if args.token_file else token_from_env(env)
    except SecurityConfigError as err:
        return _usage_exit(str(err))
    options = WorkerOptions(
        worker_id=args.id,
        task_types=[],
        coordinator_host=args.coordinator_host,
        coordinator_port=args.coordinator_port,
        capacity=args.capacity,
        processes=args.processes,
        prefetch=args.prefetch,
        heartbeat_interval_ms=args.heartbeat_interval_millis,
        reconnect_delay_ms=args.reconnect_delay_millis,
        cancel_grace_ms=args.cancel_grace_millis,
        drain_timeout_ms=args.drain_timeout_millis,
        coordinator_timeout_ms=args.coordinator_timeout_millis,
        shard_refresh_ms=args.shard_refresh_millis,
        tls=tls,
        auth_token=token,
        queues=args.queues,
    )
    try:
        return asyncio.run(_run(options, args.tasks, level))
    except KeyboardInterrupt:
        return 130


async def _run(options: WorkerOptions, modules: list[str], level: int) -> int:
    pool = TaskPool(
        options.capacity,
        modules,
        options.cancel_grace_ms / 1000,
        queue_limit=options.effective_prefetch,
        log_level=level,
        processes=options.processes,
    )
    answer = await pool.start()
    if answer.get("type") != "LOADED":
        await pool.close()
        module = answer.get("module")
        where = f"task module {module}" if module else f"task modules {', '.join(modules)}"
        return _usage_exit(f"{where}: {answer.get('problem')}")
    custom = [str(name) for name in answer.get("taskTypes") or []]
    if len(custom) + len(BUILTIN_TASK_TYPES) > MAX_TASK_TYPES_PER_WORKER:
        await pool.close()
        return _usage_exit(
            f"task modules {', '.join(modules)}: they declare {len(custom)} tasks; a worker runs "
            f"at most {MAX_TASK_TYPES_PER_WORKER - len(BUILTIN_TASK_TYPES)} besides the built-ins"
        )
    options.task_types = [*BUILTIN_TASK_TYPES, *custom]
    worker = Worker(options, pool)
    loop = asyncio.get_running_loop()
    signals = {"count": 0}
    closing: list[asyncio.Future[None]] = []

    def on_signal(name: str) -> None:
        signals["count"] += 1
        if signals["count"] == 1:
            log.info(f"{name} received: draining")
            worker.drain()
        else:
            log.warning(f"{name} received again: stopping now")
            closing.append(asyncio.ensure_future(worker.close()))

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)
    log.info(
        "worker started",
        extra={
            "fields": {
                "workerId": options.worker_id,
                "coordinator": ",".join(
                    str(a)
                    for a in parse_address_list(options.coordinator_host, options.coordinator_port)
                ),
                "capacity": options.capacity,
                "processes": pool.shared_count,
                "prefetch": options.effective_prefetch,
                "taskTypes": ",".join(options.task_types),
                "pids": ",".join(str(p) for p in pool.pids),
            }
        },
    )
    code = await worker.run()
    refusal = worker.refusal
    if refusal is not None:
        print(f"{PROG}: refused by the coordinator ({refusal.code}): {refusal}", file=sys.stderr)
    return code
