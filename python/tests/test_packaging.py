"""The package installs with no package index: a fresh virtual environment
(its setuptools removed, as Python 3.12 and later ship none) gets it with
``pip install --no-index`` and with an index that refuses connections, as a
wheel, as an editable install and from its sdist; then ``import dtp`` and the
worker's ``--help`` work. And the backend's own parts: its reader of
pyproject.toml for Pythons without ``tomllib``, and reproducible archives."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PACKAGE / "backend"))
import dtp_build  # noqa: E402


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections (bound, never listening)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def offline_env(index_port: int) -> dict[str, str]:
    """pip with this machine's configuration ignored and its index at a closed port."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV"))}
    env.pop("PYTHONPATH", None)
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_INDEX_URL=f"http://127.0.0.1:{index_port}/simple",
        PIP_RETRIES="0",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


def run(argv: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, f"{argv} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def copy_package(target: Path) -> Path:
    """The package's sources (what a checkout holds) in a folder of the test's own."""
    shutil.copytree(
        PACKAGE,
        target,
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", ".*_cache", "build", "dist"),
    )
    return target


def assert_installed(python: Path, env: dict[str, str], cwd: Path, expect_under: Path) -> None:
    where = run([str(python), "-c", "import dtp; print(dtp.__file__)"], env, cwd).strip()
    assert Path(where).is_relative_to(expect_under), where
    usage = run([str(python), "-m", "dtp.worker", "--help"], env, cwd)
    assert usage.startswith("usage: python -m dtp.worker"), usage


def test_installs_with_no_index_as_a_wheel_an_editable_install_and_an_sdist(
    tmp_path: Path, closed_port: int
) -> None:
    env = offline_env(closed_port)
    source = copy_package(tmp_path / "python")
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], env, tmp_path)
    pip, python = [str(venv / "bin" / "pip")], venv / "bin" / "python"
    run([*pip, "uninstall", "-y", "setuptools"], env, tmp_path)
    site = Path(
        run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            env,
            tmp_path,
        ).strip()
    )

    run([*pip, "install", "--no-index", str(source)], env, tmp_path)
    assert_installed(python, env, tmp_path, site)
    assert (site / "dtp" / "py.typed").is_file()

    # From its sdist, the index refusing connections (pip never asks it), over the first.
    sdist = tmp_path / "sdist"
    sdist.mkdir()
    build = "import dtp_build, sys; print(dtp_build.build_sdist(sys.argv[1]))"
    backend = {**env, "PYTHONPATH": str(source / "backend")}
    name = run([str(python), "-c", build, str(sdist)], backend, tmp_path).strip()
    installed = run([*pip, "install", str(sdist / name)], env, tmp_path)
    assert "Successfully installed dtp-0.1.0" in installed, installed
    assert_installed(python, env, tmp_path, site)

    run([*pip, "install", "-e", str(source)], env, tmp_path)
    assert_installed(python, env, tmp_path, source / "src")


def test_the_fallback_reader_of_pyproject_agrees_with_tomllib() -> None:
    tomllib = pytest.importorskip("tomllib")
    text = (PACKAGE / "pyproject.toml").read_text(encoding="utf-8")
    assert dtp_build.parse_project_tables(text)["project"] == tomllib.loads(text)["project"]


def test_the_fallback_reader_refuses_what_it_cannot_read() -> None:
    with pytest.raises(dtp_build.BuildError, match="needs tomllib"):
        dtp_build.parse_project_tables('[project]\nlicense = { text = "MIT" }\n')
    with pytest.raises(dtp_build.BuildError, match="string or an array of strings"):
        dtp_build.parse_project_tables("[project]\nversion = 3\n")
    parsed = dtp_build.parse_project_tables(
        '[tool.x]\nname = "not me"\n[project]  # the table\nname = "a#b"  # kept\n'
        "classifiers = [\n  \"x\",  # first\n  'y',\n]\n[project.optional-dependencies]\n"
        'dev = ["p>=1"]\n'
    )
    assert parsed == {
        "project": {
            "name": "a#b",
            "classifiers": ["x", "y"],
            "optional-dependencies": {"dev": ["p>=1"]},
        }
    }


def test_a_wheel_is_reproducible_and_its_record_holds(tmp_path: Path) -> None:
    first, second = tmp_path / "1", tmp_path / "2"
    first.mkdir()
    second.mkdir()
    name = dtp_build.build_wheel(str(first))
    assert name == dtp_build.build_wheel(str(second)) == "dtp-0.1.0-py3-none-any.whl"
    assert (first / name).read_bytes() == (second / name).read_bytes()
    with zipfile.ZipFile(first / name) as wheel:
        names = wheel.namelist()
        record = wheel.read("dtp-0.1.0.dist-info/RECORD").decode().splitlines()
        for line in record:
            path, digest, size = line.rsplit(",", 2)
            if path.endswith("RECORD"):
                continue
            data = wheel.read(path)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            assert (digest, int(size)) == (f"sha256={expected.decode()}", len(data)), path
    assert "dtp/worker/_child.py" in names and "dtp/py.typed" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert len(record) == len(names)


def test_an_sdist_holds_what_a_wheel_is_built_from(tmp_path: Path) -> None:
    name = dtp_build.build_sdist(str(tmp_path))
    with tarfile.open(tmp_path / name) as sdist:
        names = set(sdist.getnames())
    assert {
        "dtp-0.1.0/PKG-INFO",
        "dtp-0.1.0/pyproject.toml",
        "dtp-0.1.0/README.md",
        "dtp-0.1.0/backend/dtp_build.py",
        "dtp-0.1.0/src/dtp/__init__.py",
        "dtp-0.1.0/src/dtp/py.typed",
    } <= names
