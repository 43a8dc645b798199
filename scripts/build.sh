#!/usr/bin/env bash
# Installs dependencies when node_modules is missing, then compiles to dist/.
# Idempotent: a second run only recompiles what changed (tsc incremental),
# and builds the dashboard's assets again only when a file they may be built
# from (ui/, src/, package.json, the lock file) is newer than they are.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if [[ ! -d node_modules ]]; then
  echo "build: installing dependencies (npm ci)" >&2
  npm ci --no-audit --no-fund >&2
fi

# The local compiler and bundler, never same-named packages fetched by npx.
"$root/node_modules/.bin/tsc" -p tsconfig.json
# The dashboard's assets (dist/ui), served by the coordinator's HTTP port.
built=dist/ui/index.html
if [[ ! -f "$built" || -n "$(find ui src package.json package-lock.json -newer "$built" -print -quit)" ]]; then
  "$root/node_modules/.bin/tsc" -p ui/tsconfig.json
  "$root/node_modules/.bin/vite" build --config ui/vite.config.ts
fi
