#!/bin/sh
# Entry point of the container image, usable from a repository checkout too:
#
#   docker-entrypoint.sh coordinator [flags]   dist/src/cli/coordinator-main.js
#   docker-entrypoint.sh worker [flags]        dist/src/cli/worker-main.js
#   docker-entrypoint.sh client <command> ...  dist/src/cli/client-main.js
#   docker-entrypoint.sh healthcheck [port [host]]
#       exit 0 if GET /healthz answers 200 (port default $DTP_METRICS_PORT,
#       else 9464; host default 127.0.0.1), 1 otherwise; over HTTPS when
#       DTP_HEALTHCHECK_CA names the CA to trust (the coordinator has a certificate)
#   docker-entrypoint.sh init-secrets <dir>
#       creates what is missing in <dir>: a CA (ca.pem), a server certificate
#       for the names in $DTP_TLS_NAMES (default coordinator,localhost,127.0.0.1:
#       server.pem, server.key), client.tokens and worker.tokens; files already
#       there (your own certificate, your own tokens) are kept
#
# Paths are resolved from this file's location, not the working directory. It
# never builds: run `npm run build` first in a checkout.
set -eu

root="$(cd "$(dirname "$0")/.." && pwd)"

usage() {
  sed -n '2,17s/^# \{0,1\}//p' "$0"
}

# One random token per file: 32 bytes of the kernel's randomness, hex.
new_token() {
  node -e 'process.stdout.write(require("node:crypto").randomBytes(32).toString("hex") + "\n")'
}

init_secrets() {
  dir="$1"
  umask 077
  mkdir -p "$dir"
  if [ ! -f "$dir/server.pem" ] || [ ! -f "$dir/server.key" ]; then
    command -v openssl >/dev/null || { echo "init-secrets: openssl is needed" >&2; exit 1; }
    names="${DTP_TLS_NAMES:-coordinator,localhost,127.0.0.1}"
    san=""
    old_ifs="$IFS"
    IFS=,
    for name in $names; do
      case "$name" in
        *[!0-9.]*) entry="DNS:$name" ;;
        *) entry="IP:$name" ;;
      esac
      san="${san:+$san,}$entry"
    done
    IFS="$old_ifs"
    work="$(mktemp -d)"
    key_opts="-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
    # shellcheck disable=SC2086 # key_opts is a list of options
    openssl req -x509 $key_opts -keyout "$work/ca.key" -out "$dir/ca.pem" \
      -days 825 -subj "/CN=dtp compose CA" 2>/dev/null
    # shellcheck disable=SC2086
    openssl req $key_opts -keyout "$dir/server.key" -out "$work/server.csr" \
      -subj "/CN=${names%%,*}" 2>/dev/null
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$san" >"$work/ext"
    openssl x509 -req -in "$work/server.csr" -CA "$dir/ca.pem" -CAkey "$work/ca.key" \
      -CAcreateserial -CAserial "$work/ca.srl" -out "$dir/server.pem" -days 825 \
      -extfile "$work/ext" 2>/dev/null
    # The CA key is not kept: nothing else is ever signed with it.
    rm -rf "$work"
    echo "init-secrets: new CA and server certificate for $names in $dir"
  fi
  for who in client worker; do
    if [ ! -s "$dir/$who.tokens" ]; then
      new_token >"$dir/$who.tokens"
      echo "init-secrets: new $who token in $dir/$who.tokens"
    fi
  done
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
    if [ "$role" = worker ]; then
      # As scripts/worker.sh does: freed Buffers go back to the system.
      export MALLOC_MMAP_THRESHOLD_="${MALLOC_MMAP_THRESHOLD_:-131072}"
    fi
    # exec: node takes over this PID (PID 1 in a container), so SIGTERM from
    # `docker stop` reaches its handlers: a worker drains, a coordinator
    # commits and closes.
    # Usage and errors name the program as it was started: `docker-entrypoint.sh worker`.
    export DTP_PROGRAM_NAME="${0##*/} $role"
    exec node "$entry" "$@"
    ;;
  healthcheck)
    port="${2:-${DTP_METRICS_PORT:-9464}}"
    host="${3:-127.0.0.1}"
    # node's own http(s): the slim image has no curl or wget. The `${...}`
    # below belong to JavaScript, hence single quotes.
    # shellcheck disable=SC2016
    exec node -e '
      const [port, host, caFile] = process.argv.slice(1);
      const tls = caFile !== "";
      const options = { host, port, path: "/healthz", timeout: 3000 };
      if (tls) options.ca = require("node:fs").readFileSync(caFile);
      const req = require(tls ? "node:https" : "node:http").get(options, (res) => {
        res.pipe(process.stdout);
        res.on("end", () => process.exit(res.statusCode === 200 ? 0 : 1));
      });
      req.on("timeout", () => req.destroy(new Error("timed out")));
      req.on("error", (err) => {
        process.stderr.write(`healthcheck: ${err.message}\n`);
        process.exit(1);
      });
    ' "$port" "$host" "${DTP_HEALTHCHECK_CA:-}"
    ;;
  init-secrets)
    [ $# -ge 2 ] || { usage >&2; exit 2; }
    init_secrets "$2"
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
