"""The build backend of this package (PEP 517, with PEP 660 editable wheels):
standard library only and needing nothing installed, so ``pip install ./python``
and ``pip install -e ./python`` work without a package index, on any Python
the package supports, including virtual environments that ship no setuptools.

pyproject.toml names it (``build-backend = "dtp_build"``, ``backend-path``,
``requires = []``). It reads the ``[project]`` table and builds:

- a wheel (``dtp-<version>-py3-none-any.whl``): the ``src/`` tree, pure Python,
  and its ``.dist-info`` (METADATA, WHEEL, RECORD);
- an editable wheel: a ``.pth`` file that puts this checkout's ``src/`` on the
  import path, and the same ``.dist-info``;
- an sdist (``dtp-<version>.tar.gz``): pyproject.toml, README.md, this backend
  and ``src/``, with PKG-INFO.

Archives are reproducible: entries sorted, times fixed (``SOURCE_DATE_EPOCH``
when set), no owner names. Only the ``[project]`` keys this package uses are
understood; any other is refused rather than silently left out.
"""

from __future__ import annotations

import ast
import base64
import calendar
import gzip
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
"""The package's folder (the one holding pyproject.toml)."""

_KNOWN_KEYS = frozenset(
    {
        "name",
        "version",
        "description",
        "readme",
        "requires-python",
        "license",
        "dependencies",
        "optional-dependencies",
        "classifiers",
    }
)
_SDIST_FILES = ("pyproject.toml", "README.md", "backend/dtp_build.py")
_WHEEL_TAG = "py3-none-any"
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)

# ------------------------------------------------------------ pyproject.toml


class BuildError(Exception):
    """pyproject.toml asks for something this backend does not do."""


def _strip_comment(line: str) -> str:
    """``line`` without a trailing ``# comment`` (a ``#`` inside a string stays)."""
    quote: str | None = None
    escaped = False
    for i, char in enumerate(line):
        if escaped:
            escaped = False
        elif quote == '"' and char == "\\":
            escaped = True
        elif quote is not None:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "#":
            return line[:i]
    return line


def _balanced(text: str) -> bool:
    depth = 0
    quote: str | None = None
    escaped = False
    for char in text:
        if escaped:
            escaped = False
        elif quote == '"' and char == "\\":
            escaped = True
        elif quote is not None:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
    return depth == 0 and quote is None


_HEADER = re.compile(r"\[([A-Za-z0-9_.-]+)\]")
_KEY = re.compile(r"([A-Za-z0-9_-]+)\s*=\s*(.*)", re.S)


def parse_project_tables(text: str) -> dict[str, Any]:
    """The ``[project]`` and ``[project.*]`` tables of a TOML text, for Pythons
    without ``tomllib`` (before 3.11). Values there may be strings and arrays of
    strings, as this package's are; other tables are skipped unread."""
    project: dict[str, Any] = {}
    table: dict[str, Any] | None = None
    pending = ""
    for raw in text.splitlines():
        line = _strip_comment(raw).strip()
        if not pending:
            header = _HEADER.fullmatch(line)
            if header is not None:
                name = header.group(1)
                table = _table_for(project, name)
                continue
        if table is None or not (pending or line):
            continue
        pending = f"{pending} {line}" if pending else line
        if not _balanced(pending):
            continue
        entry = _KEY.fullmatch(pending)
        pending = ""
        if entry is None:
            raise BuildError(f"pyproject.toml: cannot read {raw.strip()[:80]!r}")
        table[entry.group(1)] = _literal(entry.group(1), entry.group(2).strip())
    return {"project": project}


def _table_for(project: dict[str, Any], name: str) -> dict[str, Any] | None:
    if name == "project":
        return project
    if name.startswith("project."):
        sub: dict[str, Any] = project.setdefault(name[len("project.") :], {})
        return sub
    return None


def _literal(key: str, value: str) -> Any:
    try:
        parsed = ast.literal_eval(value)
    except (SyntaxError, ValueError):
        raise BuildError(
            f"pyproject.toml: {key} = {value[:60]} needs tomllib (Python 3.11 or later)"
        ) from None
    if isinstance(parsed, str) or (
        isinstance(parsed, list) and all(isinstance(v, str) for v in parsed)
    ):
        return parsed
    raise BuildError(f"pyproject.toml: {key} must be a string or an array of strings")


def read_project(root: Path = ROOT) -> dict[str, Any]:
    """The ``[project]`` table of ``root/pyproject.toml``."""
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib
    except ImportError:
        data = parse_project_tables(text)
    else:
        data = tomllib.loads(text)
    project: dict[str, Any] = data["project"]
    unknown = sorted(set(project) - _KNOWN_KEYS)
    if unknown:
        raise BuildError(f"pyproject.toml: [project] keys this backend does not know: {unknown}")
    return project


# ------------------------------------------------------------------ metadata


def metadata(project: dict[str, Any], root: Path = ROOT) -> str:
    """Core metadata (version 2.1) of the ``[project]`` table, with the readme as body."""
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
    ]
    if "description" in project:
        lines.append(f"Summary: {project['description']}")
    if "license" in project:
        lines.append(f"License: {project['license']}")
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    lines += [f"Classifier: {c}" for c in project.get("classifiers", [])]
    lines += [f"Requires-Dist: {d}" for d in project.get("dependencies", [])]
    for extra, requirements in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in requirements]
    body = ""
    if "readme" in project:
        readme = str(project["readme"])
        kind = "text/markdown" if readme.endswith(".md") else "text/plain"
        lines.append(f"Description-Content-Type: {kind}")
        body = "\n" + (root / readme).read_text(encoding="utf-8")
    return "\n".join(lines) + "\n" + body


def _dist_name(project: dict[str, Any]) -> str:
    name = re.sub(r"[-_.]+", "_", str(project["name"])).lower()
    return f"{name}-{project['version']}"


def _dist_info(project: dict[str, Any]) -> str:
    return f"{_dist_name(project)}.dist-info"


def _wheel_file(editable: bool) -> str:
    generator = "dtp_build (editable)" if editable else "dtp_build"
    return f"Wheel-Version: 1.0\nGenerator: {generator}\nRoot-Is-Purelib: true\nTag: {_WHEEL_TAG}\n"


# -------------------------------------------------------------------- wheels


def _package_files(root: Path = ROOT) -> Iterator[tuple[str, Path]]:
    """``(path in the wheel, file)`` of everything under ``src/`` but caches, sorted."""
    src = root / "src"
    for path in sorted(src.rglob("*")):
        relative = path.relative_to(src)
        if path.is_dir() or "__pycache__" in relative.parts or path.suffix in (".pyc", ".pyo"):
            continue
        yield relative.as_posix(), path


def _date_time() -> tuple[int, int, int, int, int, int]:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is None or not epoch.isdigit():
        return _ZIP_EPOCH
    stamp = time.gmtime(max(int(epoch), 315_532_800))  # a zip cannot go before 1980
    return (stamp.tm_year, stamp.tm_mon, stamp.tm_mday, stamp.tm_hour, stamp.tm_min, stamp.tm_sec)


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _write_wheel(target: Path, entries: list[tuple[str, bytes]], dist_info: str) -> None:
    """A wheel of ``entries`` (sorted, fixed times) with its RECORD last."""
    record = [_record_line(name, data) for name, data in entries]
    record.append(f"{dist_info}/RECORD,,")
    everything = [*entries, (f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode())]
    stamp = _date_time()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in everything:
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)


def _metadata_entries(project: dict[str, Any], editable: bool) -> list[tuple[str, bytes]]:
    dist_info = _dist_info(project)
    return [
        (f"{dist_info}/METADATA", metadata(project).encode("utf-8")),
        (f"{dist_info}/WHEEL", _wheel_file(editable).encode("utf-8")),
    ]


def _build(wheel_directory: str, editable: bool) -> str:
    project = read_project()
    if editable:
        pth = f"__editable__.{_dist_name(project)}.pth"
        entries = [(pth, f"{ROOT / 'src'}\n".encode())]
    else:
        entries = [(name, path.read_bytes()) for name, path in _package_files()]
    entries += _metadata_entries(project, editable)
    filename = f"{_dist_name(project)}-{_WHEEL_TAG}.whl"
    _write_wheel(Path(wheel_directory) / filename, entries, _dist_info(project))
    return filename


def _prepare_metadata(metadata_directory: str, editable: bool) -> str:
    project = read_project()
    dist_info = Path(metadata_directory) / _dist_info(project)
    dist_info.mkdir(parents=True, exist_ok=True)
    for name, data in _metadata_entries(project, editable):
        (dist_info / Path(name).name).write_bytes(data)
    return dist_info.name


# ---------------------------------------------------------------------- sdist


def _sdist_files(root: Path = ROOT) -> Iterator[tuple[str, Path]]:
    for name in _SDIST_FILES:
        yield name, root / name
    for name, path in _package_files(root):
        yield f"src/{name}", path


def _tar_entry(name: str, data: bytes, mtime: int) -> tuple[tarfile.TarInfo, io.BytesIO]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = mtime
    info.mode = 0o644
    return info, io.BytesIO(data)


# ------------------------------------------------------------- PEP 517 hooks


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    return []


def get_requires_for_build_editable(config_settings: dict[str, Any] | None = None) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings: dict[str, Any] | None = None) -> list[str]:
    return []


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: dict[str, Any] | None = None
) -> str:
    return _prepare_metadata(metadata_directory, editable=False)


def prepare_metadata_for_build_editable(
    metadata_directory: str, config_settings: dict[str, Any] | None = None
) -> str:
    return _prepare_metadata(metadata_directory, editable=True)


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    return _build(wheel_directory, editable=False)


def build_editable(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    return _build(wheel_directory, editable=True)


def build_sdist(sdist_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    project = read_project()
    base = _dist_name(project)
    mtime = calendar.timegm((*_date_time(), 0, 0, 0))
    filename = f"{base}.tar.gz"
    entries = [("PKG-INFO", metadata(project).encode("utf-8"))]
    entries += [(name, path.read_bytes()) for name, path in _sdist_files()]
    with (
        open(Path(sdist_directory) / filename, "wb") as out,
        gzip.GzipFile(fileobj=out, mode="wb", mtime=mtime) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name, data in sorted(entries):
            tar.addfile(*_tar_entry(f"{base}/{name}", data, mtime))
    return filename
