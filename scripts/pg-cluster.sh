#!/usr/bin/env bash
# A private, throw-away PostgreSQL cluster for tests (never a production setup).
#
#   scripts/pg-cluster.sh start <dir>   initdb into <dir>/data (as the OS user postgres when
#                                       run as root), start it on a free 127.0.0.1 port, print
#                                       its URL (postgres://postgres@127.0.0.1:<port>/postgres)
#                                       and write it to <dir>/url
#   scripts/pg-cluster.sh stop <dir>    stop the postmaster started in <dir> (by its pid), and
#                                       remove <dir>
#
# Trust authentication on loopback only; fsync and synchronous_commit stay on (the defaults).
# Binaries: $PGBIN, else the newest /usr/lib/postgresql/*/bin, else apt-get install postgresql
# when DTP_PG_INSTALL=1 (CI sets it).
set -euo pipefail

usage() { echo "usage: $0 start|stop <dir>" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
cmd=$1 dir=$2

find_bin() {
  if [[ -n "${PGBIN:-}" && -x "$PGBIN/initdb" ]]; then echo "$PGBIN"; return 0; fi
  local found
  found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  if [[ -n "$found" && -x "$found/initdb" ]]; then echo "$found"; return 0; fi
  return 1
}

# Runs a command as the owner of the cluster: postgres when we are root (initdb refuses root).
as_owner() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

start() {
  local bin
  if ! bin=$(find_bin); then
    if [[ "${DTP_PG_INSTALL:-0}" == 1 && $(id -u) -eq 0 ]]; then
      echo "pg-cluster: installing postgresql with apt-get" >&2
      apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
      bin=$(find_bin) || { echo "pg-cluster: no PostgreSQL binaries after install" >&2; exit 1; }
    else
      echo "pg-cluster: no PostgreSQL server binaries (apt-get install postgresql)" >&2
      exit 1
    fi
  fi
  if [[ $(id -u) -eq 0 ]] && ! id postgres >/dev/null 2>&1; then
    useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
  fi
  mkdir -p "$dir"
  local data="$dir/data"
  mkdir -p "$data"
  chmod 700 "$data"
  if [[ $(id -u) -eq 0 ]]; then chown -R postgres "$dir"; chmod 755 "$dir"; fi
  as_owner "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  local port tries=0
  until port=$(free_port) && as_owner "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [[ $tries -ge 3 ]]; then tail -20 "$dir/server.log" >&2 || true; exit 1; fi
  done
  head -1 "$data/postmaster.pid" >"$dir/pid"
  echo "postgres://postgres@127.0.0.1:$port/postgres" | tee "$dir/url"
}

stop() {
  [[ -f "$dir/pid" ]] || { rm -rf "$dir"; return 0; }
  local pid cur
  pid=$(cat "$dir/pid")
  cur=$(head -1 "$dir/data/postmaster.pid" 2>/dev/null || true)
  if [[ "$pid" == "$cur" ]] && kill -0 "$pid" 2>/dev/null; then
    kill -INT "$pid" # fast shutdown
    for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}

case $cmd in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
