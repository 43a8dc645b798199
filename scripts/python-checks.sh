#!/usr/bin/env bash
# Checks of the Python package (python/): python/README.md's "Develop"
# commands, run as written, in a temporary folder laid out like a checkout (a
# copy of python/ and of dist/ beside a link to README.md, which its tests use):
# a fresh virtual environment with the package and its dev extras, then ruff,
# mypy --strict and pytest; ruff's format check besides. The tests start real
# coordinators and TypeScript workers from dist/, so build first
# (`npm run build`). Nothing is written into the work tree.
#
#   python-checks.sh [pytest arguments...]
#
# DTP_PYTHON names the interpreter (default python3); without one the checks
# are skipped, saying so. pytest runs in DTP_PYTHON_TEST_PARTS processes side
# by side (default 2 on a machine of two cores or more, else 1), each with
# every n-th test (tests/conftest.py, DTP_PYTEST_PART); the later parts'
# output is printed after the first's. The package itself installs with no package index
# (its build backend is in python/backend/). When pip cannot install the dev
# tools (no index reachable), the checks run in a venv that sees this
# machine's own packages, the package installed with --no-index, and each of
# ruff, mypy and pytest that is not on the machine is skipped, saying so. A
# package index that does not answer within seconds is said so, and pip then
# gives up each request to it at once. The install and the checks each run
# under a time limit, in a process group that is killed, with the temporary
# folder removed, however the script ends (a time limit, SIGTERM or SIGINT).
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

# pip's install of python/[dev] (a fresh venv, the dev tools); then ruff, mypy and pytest.
INSTALL_LIMIT_S=600
CHECKS_LIMIT_S=1200

tmp="$(mktemp -d "${TMPDIR:-/tmp}/dtp-python-checks.XXXXXX")"
# The process group of the step running now (see bounded), and those of the
# test parts running beside it (see pytest_parts), killed on any exit.
step=""
parts=()
cleanup() {
  [[ -z "$step" ]] || kill -KILL -- "-$step" 2>/dev/null || true
  for pid in "${parts[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
# A signal ends the script (and so runs cleanup) at once, even during a step.
trap 'exit 143' TERM
trap 'exit 130' INT
trap 'exit 129' HUP

# Runs a command under a time limit in a process group of its own (timeout
# makes one, and at the limit kills the whole group); waits in the
# background so a signal to this script is handled at once.
bounded() {
  local limit=$1
  shift
  timeout -k 5 "$limit" "$@" &
  step=$!
  local status=0
  wait "$step" || status=$?
  step=""
  if ((status == 124 || status == 137)); then
    echo "# python: \`$*\` did not end within $limit s and was killed" >&2
  fi
  return "$status"
}

# How many pytest processes run side by side.
test_parts="${DTP_PYTHON_TEST_PARTS:-}"
if [[ -z "$test_parts" ]]; then
  test_parts=1
  (($(nproc 2>/dev/null || echo 1) < 2)) || test_parts=2
fi

# Runs `$@` (a command whose last step is pytest) as the first of
# $test_parts parts, and `cd python && $later` as each later part beside
# it, every one bounded like a step; their output follows the first's.
# Fails when any part failed.
pytest_parts() {
  local later=$1
  shift
  local n=$test_parts i status=0
  for ((i = 2; i <= n; i++)); do
    DTP_PYTEST_PART="$i/$n" timeout -k 5 "$CHECKS_LIMIT_S" bash -c "cd python && $later" \
      >"$tmp/part$i.log" 2>&1 &
    parts+=($!)
  done
  if ((n > 1)); then
    DTP_PYTEST_PART="1/$n" bounded "$CHECKS_LIMIT_S" "$@" || status=$?
  else
    bounded "$CHECKS_LIMIT_S" "$@" || status=$?
  fi
  for ((i = 2; i <= n; i++)); do
    local code=0
    wait "${parts[i - 2]}" || code=$?
    echo "# python: pytest part $i of $n:"
    cat "$tmp/part$i.log"
    if ((code == 124 || code == 137)); then
      echo "# python: pytest part $i did not end within $CHECKS_LIMIT_S s and was killed" >&2
    fi
    ((code == 0)) || status=$code
  done
  parts=()
  return "$status"
}

# The package index pip uses (PIP_INDEX_URL, pip's configuration, else PyPI):
# when it gives no answer within seconds, pip gives up each request to it at
# once instead of waiting PIP_DEFAULT_TIMEOUT (15 s, or as configured) on
# every one.
index_unreachable() {
  local index="${PIP_INDEX_URL:-}"
  [[ -n "$index" ]] || index="$("$py" -m pip config get global.index-url 2>/dev/null || true)"
  [[ -n "$index" ]] || index="https://pypi.org/simple/"
  [[ "$index" == http* ]] || return 1
  "$py" - "$index" <<'PY' >"$tmp/index.txt" 2>&1 && return 1
import sys
import urllib.error
import urllib.request

try:
    urllib.request.urlopen(urllib.request.Request(sys.argv[1], method="HEAD"), timeout=5)
except urllib.error.HTTPError:
    pass  # it answered
except Exception as err:  # noqa: BLE001 - any other failure means out of reach
    print(f"{sys.argv[1]}: {err}")
    sys.exit(1)
PY
  return 0
}
checkout="$tmp/checkout"
mkdir -p "$checkout/python"
(cd "$root/python" && tar --exclude=__pycache__ --exclude='*.egg-info' --exclude=build \
  --exclude=.mypy_cache --exclude=.pytest_cache --exclude=.ruff_cache -cf - .) |
  (cd "$checkout/python" && tar -xf -)
# A copy of dist/, not a link to it: the packed-package test, which runs
# beside these checks, rebuilds dist/ in place (npm pack's prepack), and a
# coordinator started meanwhile could load a half-written module. Its
# packages and its module type come from the checkout's own files.
cp -R "$root/dist" "$checkout/dist"
ln -s "$root/node_modules" "$checkout/node_modules"
ln -s "$root/package.json" "$checkout/package.json"
ln -s "$root/README.md" "$checkout/README.md"
cd "$checkout"

# python/README.md's "Develop" commands (test/helpers/doc-coverage.ts holds them too).
setup='python3 -m venv .venv && .venv/bin/pip install -e "./python[dev]"'
checks='cd python && ../.venv/bin/ruff check . && ../.venv/bin/mypy && ../.venv/bin/pytest'
[[ "$py" == python3 ]] || setup="${setup/python3/$py}"

echo "# python: $("$py" --version) in a fresh venv ($checkout/.venv)"
if index_unreachable; then
  echo "# python: the package index is out of reach ($(tail -n 1 "$tmp/index.txt")): pip uses local sources only"
  export PIP_DEFAULT_TIMEOUT=1
fi
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
if bounded "$INSTALL_LIMIT_S" bash -c "$setup" >"$tmp/pip.log" 2>&1; then
  echo "# python: installed in $((SECONDS - started)) s"
  .venv/bin/ruff format --no-cache --check python
  pytest_parts ../.venv/bin/pytest bash -c "$checks"
  echo "# python: checks done in $((SECONDS - started)) s"
  exit 0
fi

echo "# python: pip could not install python/[dev] (no package index?):"
grep -v -e Retrying -e 'is ignored' "$tmp/pip.log" | tail -n 3 | sed 's/^/#   /'
echo "# python: checking with the tools this machine has, the package installed offline"
rm -rf .venv
"$py" -m venv --system-site-packages .venv
# The package needs no index; failing here is a failure of the checks.
bounded "$INSTALL_LIMIT_S" .venv/bin/pip install --no-index -e ./python
ran=()
skipped=()
tool() { .venv/bin/python -m "$1" --version >/dev/null 2>&1; }
if tool ruff; then
  .venv/bin/python -m ruff format --no-cache --check python
  (cd python && ../.venv/bin/python -m ruff check .)
  ran+=(ruff)
else skipped+=(ruff); fi
if tool mypy; then
  (cd python && bounded "$CHECKS_LIMIT_S" ../.venv/bin/python -m mypy)
  ran+=(mypy)
else skipped+=(mypy); fi
if tool pytest; then
  pytest_parts "../.venv/bin/python -m pytest" bash -c "cd python && ../.venv/bin/python -m pytest"
  ran+=(pytest)
else skipped+=("pytest (so no test ran)"); fi
for name in "${skipped[@]}"; do echo "# python: $name is not installed here: skipped"; done
echo "# python: ${ran[*]:-no check} done in $((SECONDS - started)) s"
