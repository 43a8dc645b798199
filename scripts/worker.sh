#!/usr/bin/env bash
# Runs a worker in the foreground (flags: --help). Works from any directory
# and does not change it, so relative paths in flags resolve against the
# caller's directory. Builds first when the compiled entry point is missing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
entry="$root/dist/src/cli/worker-main.js"

if [[ ! -f "$entry" ]]; then
  # tsc still emits when it reports type errors; go on if the entry exists.
  "$root/scripts/build.sh" >&2 || [[ -f "$entry" ]] || {
    echo "worker.sh: build failed" >&2
    exit 1
  }
fi

# Usage and errors name the program by the name it was started by.
export DTP_PROGRAM_NAME="${0##*/}"

# glibc: allocations of 128 KiB and more always come from mmap, so what a
# task thread frees (large Buffers, a terminated thread's memory) goes back
# to the system at once instead of staying in the allocator's arenas
# (docs/SECURITY.md, "Task memory"). A value already set is kept.
export MALLOC_MMAP_THRESHOLD_="${MALLOC_MMAP_THRESHOLD_:-131072}"
# exec: node takes over this PID, so a signal sent to the script reaches it.
exec node "$entry" "$@"
