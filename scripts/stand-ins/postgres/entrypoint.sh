#!/bin/sh
# Entry point of the stand-in for the official postgres image that
# scripts/verify-image.sh builds: the same POSTGRES_USER, POSTGRES_PASSWORD
# and POSTGRES_DB on first start, the data in $PGDATA, listening on all
# addresses of the container. As with the official image, a command
# `postgres -c name=value ...` adds those settings.
set -eu
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile="$(mktemp)"
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=" -w start >/dev/null
  createdb -U "$POSTGRES_USER" "$POSTGRES_DB"
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
if [ "${1:-}" = postgres ]; then shift; fi
exec postgres -D "$PGDATA" -c 'listen_addresses=*' "$@"
