#!/usr/bin/env bash
# Checks of the Python package (python/): python/README.md's "Develop"
# commands, run as written, in a temporary folder laid out like a checkout (a
# copy of python/ beside links to dist/ and README.md, which its tests use):
# a fresh virtual environment with the package and its dev extras, then ruff,
# mypy --strict and pytest; ruff's format check besides. The tests start real
# coordinators and TypeScript workers from dist/, so build first
# (`npm run build`). Nothing is written into the work tree.
#
#   python-checks.sh [pytest arguments...]
#
# DTP_PYTHON names the interpreter (default python3); without one the checks
# are skipped, saying so. The package itself installs with no package index
# (its build backend is in python/backend/). When pip cannot install the dev
# tools (no index reachable), the checks run in a venv that sees this
# machine's own packages, the package installed with --no-index, and each of
# ruff, mypy and pytest that is not on the machine is skipped, saying so.
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
checkout="$tmp/checkout"
mkdir -p "$checkout/python"
(cd "$root/python" && tar --exclude=__pycache__ --exclude='*.egg-info' --exclude=build \
  --exclude=.mypy_cache --exclude=.pytest_cache --exclude=.ruff_cache -cf - .) |
  (cd "$checkout/python" && tar -xf -)
ln -s "$root/dist" "$checkout/dist"
ln -s "$root/README.md" "$checkout/README.md"
cd "$checkout"

# python/README.md's "Develop" commands (test/helpers/doc-coverage.ts holds them too).
setup='python3 -m venv .venv && .venv/bin/pip install -e "./python[dev]"'
checks='cd python && ../.venv/bin/ruff check . && ../.venv/bin/mypy && ../.venv/bin/pytest'
[[ "$py" == python3 ]] || setup="${setup/python3/$py}"

echo "# python: $("$py" --version) in a fresh venv ($checkout/.venv)"
# PIP_RETRIES=0 (also for the pip that sets up the build environment): an
# index that cannot be reached is given up at once; pip's default retries
# would spend minutes on it before trying the next index.
export PIP_RETRIES=0 PIP_QUIET=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
export PYTHONDONTWRITEBYTECODE=1
# pytest reads extra arguments from PYTEST_ADDOPTS (shell-quoted); its cache
# and mypy's stay in the temporary folder.
args=""
(($# == 0)) || args="$(printf '%q ' "$@")"
export PYTEST_ADDOPTS="-p no:cacheprovider -q $args"
if bash -c "$setup" >"$tmp/pip.log" 2>&1; then
  echo "# python: installed in $((SECONDS - started)) s"
  .venv/bin/ruff format --no-cache --check python
  bash -c "$checks"
  echo "# python: checks done in $((SECONDS - started)) s"
  exit 0
fi

echo "# python: pip could not install python/[dev] (no package index?):"
grep -v -e Retrying -e 'is ignored' "$tmp/pip.log" | tail -n 3 | sed 's/^/#   /'
echo "# python: checking with the tools this machine has, the package installed offline"
rm -rf .venv
"$py" -m venv --system-site-packages .venv
# The package needs no index; failing here is a failure of the checks.
.venv/bin/pip install --no-index -e ./python
ran=()
skipped=()
tool() { .venv/bin/python -m "$1" --version >/dev/null 2>&1; }
if tool ruff; then
  .venv/bin/python -m ruff format --no-cache --check python
  (cd python && ../.venv/bin/python -m ruff check .)
  ran+=(ruff)
else skipped+=(ruff); fi
if tool mypy; then
  (cd python && ../.venv/bin/python -m mypy)
  ran+=(mypy)
else skipped+=(mypy); fi
if tool pytest; then
  (cd python && ../.venv/bin/python -m pytest)
  ran+=(pytest)
else skipped+=("pytest (so no test ran)"); fi
for name in "${skipped[@]}"; do echo "# python: $name is not installed here: skipped"; done
echo "# python: ${ran[*]:-no check} done in $((SECONDS - started)) s"
