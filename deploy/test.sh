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

start=$SECONDS
run_pytest -m fast -n 4 --dist worksteal
fast=$?
echo "test: fast tier exit $fast after $((SECONDS - start)) s"
run_pytest -m "not fast"
slow=$?
echo "test: ovs/mininet tier exit $slow; whole suite $((SECONDS - start)) s"
((fast == 0 && slow == 0))
