#!/usr/bin/env bash
# The whole suite: lint, types, then pytest (unit, OVS integration and the
# Mininet end-to-end scenario). Run through `make test`, which sets up first.
set -uo pipefail
cd "$(dirname "$0")/.."

.venv/bin/ruff check . || exit 1
.venv/bin/ruff format --check . || exit 1
.venv/bin/mypy || exit 1

.venv/bin/pytest "$@"
status=$?
if [[ $status -eq 5 ]]; then
  echo "test: pytest collected no tests; a suite that runs nothing is a failure" >&2
  exit 1
fi
exit $status
