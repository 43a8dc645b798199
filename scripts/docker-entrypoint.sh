#!/bin/sh
# Entry point of the container image, usable from a repository checkout too:
#
#   docker-entrypoint.sh coordinator [flags]   dist/src/cli/coordinator-main.js
#   docker-entrypoint.sh worker [flags]        dist/src/cli/worker-main.js
#   docker-entrypoint.sh client <command> ...  dist/src/cli/client-main.js
#   docker-entrypoint.sh healthcheck [port [host]]
#       exit 0 if GET /healthz answers 200 (port default $DTP_METRICS_PORT,
#       else 9464; host default 127.0.0.1), 1 otherwise
#
# Paths are resolved from this file's location, not the working directory. It
# never builds: run `npm run build` first in a checkout.
set -eu

root="$(cd "$(dirname "$0")/.." && pwd)"

usage() {
  sed -n '2,10s/^# \{0,1\}//p' "$0"
}

role="${1:-}"
case "$role" in
  coordinator | worker | client)
    shift
    entry="$root/dist/src/cli/$role-main.js"
    if [ ! -f "$entry" ]; then
      echo "docker-entrypoint.sh: $entry is missing; run npm run build" >&2
      exit 1
    fi
    # exec: node takes over this PID (PID 1 in a container), so SIGTERM from
    # `docker stop` reaches its handlers: a worker drains, a coordinator
    # commits and closes.
    exec node "$entry" "$@"
    ;;
  healthcheck)
    port="${2:-${DTP_METRICS_PORT:-9464}}"
    host="${3:-127.0.0.1}"
    # node's own fetch: the slim image has no curl or wget. The `${...}` below
    # belong to JavaScript, hence single quotes.
    # shellcheck disable=SC2016
    exec node -e '
      const [port, host] = process.argv.slice(1);
      fetch(`http://${host}:${port}/healthz`, { signal: AbortSignal.timeout(3000) }).then(
        async (res) => {
          process.stdout.write(await res.text());
          process.exit(res.status === 200 ? 0 : 1);
        },
        (err) => {
          process.stderr.write(`healthcheck: ${err.message}\n`);
          process.exit(1);
        },
      );
    ' "$port" "$host"
    ;;
  -h | --help | help)
    usage
    ;;
  *)
    usage >&2
    echo "docker-entrypoint.sh: unknown role ${role:-(none)}" >&2
    exit 2
    ;;
esac
