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
# Arguments go to a single pytest run instead (e.g. `deploy/test.sh -m fast`).
set -uo pipefail
cd "$(dirname "$0")/.."

.venv/bin/ruff check . || exit 1
.venv/bin/ruff format --check . || exit 1
.venv/bin/mypy || exit 1

# pytest exits 5 when it collected nothing: a tier that runs nothing is a failure.
run_pytest() {
  .venv/bin/pytest "$@"
  local status=$?
  if [[ $status -eq 5 ]]; then
    echo "test: pytest collected no tests ($*); a suite that runs nothing is a failure" >&2
    return 1
  fi
  return $status
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
tier fast -m fast -n 4 --dist worksteal
fast=$?
echo "test: fast tier exit $fast after $((SECONDS - start)) s"
tier slow -m "not fast"
slow=$?
echo "test: ovs/mininet tier exit $slow; whole suite $((SECONDS - start)) s"
for name in fast slow; do
  if grep -q "short test summary info" "$logs/$name.log"; then
    echo "test: what failed in the $name tier:"
    sed -n '/short test summary info/,$p' "$logs/$name.log"
  fi
done
((fast == 0 && slow == 0))
