#!/usr/bin/env bash
# Checks of the Python package (python/): a fresh virtual environment in a
# temporary folder, `pip install` of a copy of python/ with its dev extras,
# then ruff (lint and format), mypy --strict and pytest. The tests start real
# coordinators and TypeScript workers from dist/, so build first
# (`npm run build`). Nothing is written into the work tree.
#
#   python-checks.sh [pytest arguments...]
#
# DTP_PYTHON names the interpreter (default python3). Without one, or when
# pip cannot install the dev tools (no package index reachable), the checks
# are skipped, saying why.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${DTP_PYTHON:-python3}"
started=$SECONDS

if ! command -v "$py" >/dev/null; then
  echo "# python: $py not found: the Python checks are skipped"
  exit 0
fi
if [[ ! -f "$root/dist/src/cli/coordinator-main.js" ]]; then
  echo "python-checks.sh: no build in dist/: run npm run build first" >&2
  exit 1
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/dtp-python-checks.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/src"
(cd "$root/python" && tar --exclude=__pycache__ --exclude='*.egg-info' --exclude=build \
  --exclude=.mypy_cache --exclude=.pytest_cache --exclude=.ruff_cache -cf - .) |
  (cd "$tmp/src" && tar -xf -)

echo "# python: $("$py" --version) in a fresh venv ($tmp)"
"$py" -m venv "$tmp/venv"
bin="$tmp/venv/bin"
# PIP_RETRIES=0 (also for the pip that sets up the build environment): an
# index that cannot be reached is given up at once; pip's default retries
# would spend minutes on it before trying the next index.
if ! PIP_RETRIES=0 "$bin/pip" install --quiet --disable-pip-version-check --no-input \
  "$tmp/src[dev]" >"$tmp/pip.log" 2>&1; then
  echo "# python: pip could not install python/[dev]; the Python checks are skipped:"
  grep -v -e Retrying -e 'is ignored' "$tmp/pip.log" | tail -n 5 | sed 's/^/#   /'
  exit 0
fi
echo "# python: installed in $((SECONDS - started)) s"

export PYTHONDONTWRITEBYTECODE=1
cd "$root/python"
"$bin/ruff" check --no-cache .
"$bin/ruff" format --no-cache --check .
"$bin/mypy" --cache-dir "$tmp/mypy-cache"
"$bin/pytest" -p no:cacheprovider -q "$@"
echo "# python: checks done in $((SECONDS - started)) s"
