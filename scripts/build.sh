#!/usr/bin/env bash
# Installs dependencies when node_modules is missing, then compiles to dist/.
# Idempotent: a second run only recompiles what changed (tsc incremental).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if [[ ! -d node_modules ]]; then
  echo "build: installing dependencies (npm ci)" >&2
  npm ci --no-audit --no-fund >&2
fi

# The local compiler, never a same-named package fetched by npx.
"$root/node_modules/.bin/tsc" -p tsconfig.json
