#!/usr/bin/env bash
# The whole suite: lint, types, then pytest in two tiers. Run through `make test`,
# which sets up first.
#
# - fast: every test that needs no Open vSwitch (pure, Redis, API and CLI processes),
#   spread over 4 pytest-xdist workers, each with its own Redis and free ports. Four on
#   two cores because much of this tier waits on processes it started and on sockets.
# - ovs/mininet: the tests that share the one ovs-vswitchd (bridge names, and the CPU
#   their latency and throughput figures are measured on), one at a time.
#
# The two tiers run at once: the OVS tier spends most of its time waiting (on traffic
# phases it times, on switches to sync), so the fast tier runs beside it at the lowest CPU
# priority (nice 19), on the CPU the OVS tier leaves idle: whenever a process of the OVS
# tier (or ovs-vswitchd, which runs above normal priority) wants a core it gets it first,
# so its figures see little of the fast tier (its comparisons are between modes of one
# run anyway). The fast tier's output is printed once it is done.
#
# Arguments go to a single pytest run instead (e.g. `deploy/test.sh -m fast`).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

.venv/bin/ruff check . || exit 1
.venv/bin/ruff format --check . || exit 1
.venv/bin/mypy || exit 1

# pytest exits 5 when it collected nothing: a tier that runs nothing is a failure.
collected_nothing() {
  local status=$1
  shift
  if [[ $status -eq 5 ]]; then
    echo "test: pytest collected no tests ($*); a suite that runs nothing is a failure" >&2
    return 1
  fi
  return "$status"
}
run_pytest() {
  .venv/bin/pytest "$@"
  collected_nothing $? "$@"
}

if (($#)); then
  run_pytest "$@"
  exit $?
fi

# Each tier's output is kept so that the end of the run repeats what failed: CI shows the
# last lines only, and a fast-tier failure would otherwise scroll away behind the slow tier.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
tier() {
  local name=$1
  shift
  run_pytest "$@" 2>&1 | tee "$logs/$name.log"
  return "${PIPESTATUS[0]}"
}

start=$SECONDS
fast_tier=(-m fast -n 4 --dist worksteal)
nice -n 19 .venv/bin/pytest "${fast_tier[@]}" >"$logs/fast.log" 2>&1 &
fast_pid=$! # pytest's own PID (nice execs it)
# However the OVS tier ends (an interrupt too), the fast tier does not outlive it.
trap 'kill "$fast_pid" 2>/dev/null; rm -rf "$logs"' EXIT
tier slow -m "not fast"
slow=$?
echo "test: ovs/mininet tier exit $slow after $((SECONDS - start)) s"
wait "$fast_pid"
collected_nothing $? "${fast_tier[@]}"
fast=$?
echo "test: the fast tier, run beside it (exit $fast):"
cat "$logs/fast.log"
echo "test: whole suite $((SECONDS - start)) s"
for name in fast slow; do
  if grep -q "short test summary info" "$logs/$name.log"; then
    echo "test: what failed in the $name tier:"
    sed -n '/short test summary info/,$p' "$logs/$name.log"
  fi
done
((fast == 0 && slow == 0))
