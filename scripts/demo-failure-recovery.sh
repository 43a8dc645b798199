#!/usr/bin/env bash
# The failure-recovery story, for real: a coordinator and three workers start,
# a 20-second job is submitted, the worker running it is killed with SIGKILL,
# the coordinator notices the lost worker, retries the job on another worker,
# and the job completes on attempt 2. Everything started here is stopped on
# exit, including on Ctrl-C or failure. Exits 0 only if the story happened.
#
# Uses ports 7070 (workers) and 7071 (clients) on 127.0.0.1 (DTP_DEMO_WORKER_PORT
# and DTP_DEMO_CLIENT_PORT choose others); logs and the database go to a fresh
# demo-logs/ folder in the current directory.
#
#   demo-failure-recovery.sh [--tokens] [--python]
#
# --tokens (or DTP_DEMO_TOKENS=1): the same story with authentication on: a
# client token and a worker token are generated into demo-logs/ (readable by
# the owner only), the coordinator requires them, and the workers and every
# client command use them.
# --python (or DTP_DEMO_PYTHON=1): the three workers are Python workers
# (python -m dtp.worker from python/src, with python3 or DTP_PYTHON). The job
# sleeps 20000 ms unless DTP_DEMO_SLEEP_MILLIS says otherwise.
set -euo pipefail

usage() { sed -n '2,21s/^# \{0,1\}//p' "$0"; }

tokens="${DTP_DEMO_TOKENS:-0}"
python="${DTP_DEMO_PYTHON:-0}"
worker_port="${DTP_DEMO_WORKER_PORT:-7070}"
client_port="${DTP_DEMO_CLIENT_PORT:-7071}"
sleep_ms="${DTP_DEMO_SLEEP_MILLIS:-20000}"
for arg in "$@"; do
  case "$arg" in
    --tokens) tokens=1 ;;
    --python) python=1 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; echo "demo-failure-recovery.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
logs="$PWD/demo-logs"
pids=()
coordinator_auth=()
worker_auth=()

say() { printf '==> %s\n' "$*"; }
die() { printf 'demo failed: %s\n' "$*" >&2; exit 1; }

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if ((${#pids[@]} > 0)); then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 50); do
      kill -0 "${pids[@]}" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Reads one field of the JSON document on stdin (dotted path).
field() { node "$root/scripts/json-field.mjs" "$1"; }

# Polls a command until it prints a non-empty line, for at most $1 seconds.
# The coordinator's reason for stopping: its last error line, else its last line.
why_stopped() {
  local line
  line=$(grep -E 'cannot start|ERROR|FATAL' "$logs/coordinator.log" | tail -n 1 || true)
  [[ -n "$line" ]] || line=$(tail -n 1 "$logs/coordinator.log")
  printf '%s' "$line"
}

poll() {
  # A bound in seconds of wall time, not in tries: on a busy machine one try
  # (a client run or two) takes seconds, and a count of tries would wait for
  # many minutes on something that is not coming.
  local deadline=$((SECONDS + $1)) out
  shift
  while ((SECONDS < deadline)); do
    # Another program on our ports answers too: stop as soon as ours is gone.
    if [[ -n "${coordinator_pid:-}" ]] && ! kill -0 "$coordinator_pid" 2>/dev/null; then
      die "the coordinator stopped: $(why_stopped)"
    fi
    out=$("$@" 2>/dev/null || true)
    if [[ -n "$out" ]]; then
      printf '%s\n' "$out"
      return 0
    fi
    sleep 0.1
  done
  return 1
}

"$root/scripts/build.sh" >/dev/null
rm -rf "$logs"
mkdir -p "$logs"

# The client CLI, with the demo's client token when there is one.
client() {
  if [[ "$tokens" == 1 ]]; then
    DTP_PORT="$client_port" DTP_TOKEN_FILE="$logs/client.token" "$root/scripts/client.sh" "$@"
  else
    DTP_PORT="$client_port" "$root/scripts/client.sh" "$@"
  fi
}

# One worker: the TypeScript one, or with --python the Python one. Run in the
# background, the exec makes $! the worker's own pid (the one SIGKILL is for).
worker() {
  if [[ "$python" == 1 ]]; then
    PYTHONPATH="$root/python/src${PYTHONPATH:+:$PYTHONPATH}" exec "${DTP_PYTHON:-python3}" -m dtp.worker "$@"
  else
    exec "$root/scripts/worker.sh" "$@"
  fi
}

if [[ "$tokens" == 1 ]]; then
  say "Authentication on: tokens in demo-logs/client.token and demo-logs/worker.token"
  (
    umask 077
    for who in client worker; do
      node -e 'process.stdout.write(require("node:crypto").randomBytes(24).toString("hex") + "\n")' \
        >"$logs/$who.token"
    done
  )
  coordinator_auth=(--client-token-file "$logs/client.token" --worker-token-file "$logs/worker.token")
  worker_auth=(--token-file "$logs/worker.token")
fi

say "Starting the coordinator (log: demo-logs/coordinator.log)"
"$root/scripts/coordinator.sh" --bind-host 127.0.0.1 --database "$logs/coordinator.db" \
  --worker-port "$worker_port" --client-port "$client_port" \
  --heartbeat-timeout-millis 2000 --sweep-interval-millis 100 \
  --retry-base-delay-millis 500 --retry-max-delay-millis 2000 \
  ${coordinator_auth[@]+"${coordinator_auth[@]}"} \
  >"$logs/coordinator.log" 2>&1 &
pids+=($!)
coordinator_pid=$!
poll 30 client workers --host 127.0.0.1 >/dev/null || die "the coordinator did not start (see demo-logs/coordinator.log)"

if [[ "$python" == 1 ]]; then
  say "The workers are Python workers ($("${DTP_PYTHON:-python3}" --version 2>&1))"
fi
declare -A worker_pid
for n in 1 2 3; do
  worker --coordinator-host 127.0.0.1 --coordinator-port "$worker_port" --id "worker-$n" --capacity 1 \
    --heartbeat-interval-millis 500 --reconnect-delay-millis 500 \
    ${worker_auth[@]+"${worker_auth[@]}"} \
    >"$logs/worker-$n.log" 2>&1 &
  pids+=($!)
  worker_pid[worker-$n]=$!
  say "Started worker-$n (pid $!)"
done
three_workers() {
  local n
  n=$(client workers --json --host 127.0.0.1 | node -e '
    let t = ""; process.stdin.on("data", (d) => (t += d)).on("end", () => console.log(JSON.parse(t).workers.length));')
  [[ "$n" == 3 ]] && echo yes
}
poll 30 three_workers >/dev/null || die "the three workers did not register"
client workers --host 127.0.0.1

say "Submitting a $((sleep_ms / 1000))-second sleep job"
job_id=$(client submit sleep --milliseconds "$sleep_ms" --json --host 127.0.0.1 | field jobId)
[[ -n "$job_id" ]] || die "submission failed"
client status "$job_id" --host 127.0.0.1

running_on() {
  local job
  job=$(client status "$job_id" --json --host 127.0.0.1)
  [[ "$(field state <<<"$job")" == RUNNING ]] && field workerId <<<"$job"
}
victim=$(poll 30 running_on) || die "the job never started running"
say "Job is RUNNING on: $victim"

victim_pid=${worker_pid[$victim]}
say "Killing $victim with SIGKILL (pid $victim_pid)"
kill -KILL "$victim_pid"
wait "$victim_pid" 2>/dev/null || true

say "Waiting for the coordinator to notice and reassign the job"
# Attempt 2 has started once the job counts two attempts. A short job may
# have ended already when this looks (a busy machine polls slowly): the
# coordinator's log names the worker that attempt was assigned to.
reassigned() {
  local job
  job=$(client status "$job_id" --json --host 127.0.0.1)
  [[ "$(field attempts <<<"$job")" == 2 ]] || return 0
  sed -nE "s/.*job assigned jobId=$job_id workerId=([^ ]+) attempt=2\/.*/\1/p" "$logs/coordinator.log" | head -n 1
}
rescuer=$(poll 30 reassigned) || die "the job was not reassigned"
say "Job reassigned to $rescuer (attempt 2)"
client status "$job_id" --host 127.0.0.1

say "Waiting for the job to finish"
client wait "$job_id" --timeout-millis 60000 --host 127.0.0.1

say "Coordinator log lines for job $job_id and $victim"
grep -E "jobId=$job_id|workerId=$victim " "$logs/coordinator.log" | sed 's/^/    /' || true

final=$(client status "$job_id" --json --host 127.0.0.1)
state=$(field state <<<"$final")
attempts=$(field attempts <<<"$final")
result=$(field result <<<"$final")
[[ "$state" == COMPLETED && "$attempts" == 2 && "$result" == "slept $sleep_ms ms" ]] ||
  die "expected COMPLETED on attempt 2, got $state on attempt $attempts"
[[ "$rescuer" != "$victim" ]] || die "the job finished on the killed worker"
kill -0 "$coordinator_pid" 2>/dev/null || die "the coordinator died"
say "Recovered: the job survived the loss of $victim and completed on $rescuer (attempt 2/3)"
