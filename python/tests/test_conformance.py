"""CONFORMANCE.md against both SDKs: every public member of the TypeScript
client (``DtpClient``, ``client.queues``, ``client.schedules``,
``client.triggers``, ``JobHandle``)
and of a handler's ``ctx`` (``AttemptContext``), read from the build in
``dist/``, has a row; every Python name a row gives exists; every public
member of the Python counterparts has a row; every error class the task SDK
of ``dtp/worker`` exports has a row naming a Python exception; and
``dtp.AsyncClient`` has every member of ``dtp.Client``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import dtp
from dtp.admin import Queues, Schedules
from dtp.signals import Triggers
from support import ROOT

TABLE = Path(__file__).resolve().parents[1] / "CONFORMANCE.md"
DIST = ROOT / "dist" / "src"

# (the file of the build, its class, the table's name for it)
TS_SURFACES = (
    ("client/client.js", "DtpClient", "client"),
    ("client/queues.js", "QueuesApi", "queues"),
    ("client/schedules.js", "Schedules", "schedules"),
    ("client/signals.js", "TriggersApi", "triggers"),
    ("client/job-handle.js", "JobHandle", "handle"),
    ("worker/attempt-context.js", "AttemptContext", "ctx"),
)
PY_CLASSES: dict[str, Any] = {
    "Client": dtp.Client,
    "Queues": Queues,
    "Schedules": Schedules,
    "Triggers": Triggers,
    "JobHandle": dtp.JobHandle,
    "TaskContext": dtp.TaskContext,
}
_MEMBER = re.compile(r"^    (?:static )?(?:async )?(?:get )?\*?([A-Za-z_$][\w$]*) ?\(", re.M)
_FIELD = re.compile(r"^        this\.([A-Za-z_$][\w$]*) =", re.M)


def ts_members(path: str, name: str) -> set[str]:
    """The public members of a class of the build: methods, getters, and the fields
    its constructor sets (private ``#`` members and the constructor left out)."""
    text = (DIST / path).read_text(encoding="utf-8")
    start = text.index(f"export class {name} ")
    body = text[start : text.index("\n}\n", start)]
    found = set(_MEMBER.findall(body)) | set(_FIELD.findall(body))
    return found - {"constructor"}


MEMBER_SECTIONS = ("The client", "A handler's `ctx`")
ERRORS_SECTION = "What a handler raises"


def rows(sections: tuple[str, ...] = MEMBER_SECTIONS) -> list[tuple[str, str]]:
    """(TypeScript, Python) of every row of the tables of those sections; ``—`` where
    there is none."""
    out = []
    text = TABLE.read_text(encoding="utf-8")
    chosen = [
        part.split("\n", 1)[1]
        for part in text.split("\n## ")[1:]
        if part.split("\n", 1)[0].strip() in sections
    ]
    assert len(chosen) == len(sections), f"CONFORMANCE.md lacks a section of {sections}"
    for line in "\n".join(chosen).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not line.startswith("|") or cells[1] == "Python":
            continue
        if set(cells[0]) <= {"-", ":"}:
            continue
        out.append((cells[0].strip("`"), cells[1].strip("`")))
    return out


def py_members(cls: Any) -> set[str]:
    names = {n for n in dir(cls) if not n.startswith("_")}
    if cls is dtp.Client:
        names |= {n for n in vars(dtp.Client("127.0.0.1:1")) if not n.startswith("_")}
    if cls is dtp.JobHandle:
        client = dtp.Client("127.0.0.1:1")
        names |= {n for n in vars(dtp.JobHandle(client, {"jobId": "j"}, None)) if n[0] != "_"}
    return names


def test_every_typescript_member_has_a_row() -> None:
    listed = {ts for ts, _ in rows() if ts != "—"}
    for path, name, surface in TS_SURFACES:
        members = {f"{surface}.{m}" for m in ts_members(path, name)}
        assert members, f"found no member of {name} in {path}"
        missing = sorted(members - {m for m in listed if m.startswith(f"{surface}.")})
        assert not missing, f"TypeScript members without a row in CONFORMANCE.md: {missing}"
        gone = sorted({m for m in listed if m.startswith(f"{surface}.")} - members)
        assert not gone, f"rows of CONFORMANCE.md for TypeScript members that are gone: {gone}"


def test_every_python_name_of_the_table_exists_and_every_member_has_a_row() -> None:
    listed: dict[str, set[str]] = {name: set() for name in PY_CLASSES}
    for _, py in rows():
        if py == "—":
            continue
        owner, _, member = py.partition(".")
        assert owner in PY_CLASSES, f"CONFORMANCE.md names an unknown Python class: {py}"
        assert member == "__init__" or member in py_members(PY_CLASSES[owner]), (
            f"CONFORMANCE.md names {py}, which does not exist"
        )
        listed[owner].add(member)
    for owner, cls in PY_CLASSES.items():
        missing = sorted(py_members(cls) - listed[owner])
        assert not missing, f"{owner} members without a row in CONFORMANCE.md: {missing}"


def test_every_error_a_typescript_handler_raises_has_a_row_naming_a_python_exception() -> None:
    text = (DIST / "worker" / "index.js").read_text(encoding="utf-8")
    exported = {
        name.strip()
        for names in re.findall(r"export \{([^}]*)\} from '\.\./sdk/task\.js'", text)
        for name in names.split(",")
        if name.strip().endswith("Error")
    }
    assert exported, "found no error class exported by dtp/worker from the task SDK"
    listed = dict(rows((ERRORS_SECTION,)))
    missing = sorted(exported - set(listed))
    assert not missing, f"errors of dtp/worker without a row in CONFORMANCE.md: {missing}"
    for ts, py in listed.items():
        owner, _, name = py.partition(".")
        found = getattr(dtp, name, None)
        assert owner == "dtp" and isinstance(found, type) and issubclass(found, Exception), (
            f"CONFORMANCE.md pairs {ts} with {py}, which is not an exception of dtp"
        )


def test_the_async_client_has_every_member_of_the_client() -> None:
    sync = py_members(dtp.Client)
    async_members = {n for n in dir(dtp.AsyncClient) if not n.startswith("_")}
    async_members |= {n for n in vars(dtp.AsyncClient("127.0.0.1:1")) if not n.startswith("_")}
    assert sync - async_members == set()
    for api, cls in (("queues", Queues), ("schedules", Schedules), ("triggers", Triggers)):
        sync_api = py_members(cls)
        async_api = {n for n in dir(getattr(dtp.AsyncClient("127.0.0.1:1"), api)) if n[0] != "_"}
        assert sync_api - async_api == set(), api


def test_the_async_client_calls_are_coroutines_or_async_iterators() -> None:
    import inspect

    client = dtp.AsyncClient("127.0.0.1:1")
    for name in py_members(dtp.Client) - {"address", "queues", "schedules", "triggers"}:
        member = getattr(dtp.AsyncClient, name)
        if name in ("watch", "events"):
            stream = client.watch("j") if name == "watch" else client.events(queue="q")
            assert hasattr(stream, "__anext__"), name
        elif name == "list":
            assert inspect.isasyncgenfunction(member), name
        else:
            assert inspect.iscoroutinefunction(member), name
    for api, cls in (("queues", Queues), ("schedules", Schedules), ("triggers", Triggers)):
        for name in py_members(cls):
            assert inspect.iscoroutinefunction(getattr(getattr(client, api), name)), (api, name)
