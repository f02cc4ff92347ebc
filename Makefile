# flowlane: `make run` starts the stack (Redis, controller, REST API), `make test`
# runs every test. Both set the machine up first (Debian packages, .venv, Open vSwitch).

SHELL := /bin/bash
# POLICY=FILE makes FILE the active policy version; unset, the stored policy is kept (an
# empty store gets the shipped default), so a plain `make run` never replaces an operator's.
POLICY ?=
OFP_PORT ?= 6653
API_PORT ?= 8080
METRICS_PORT ?= 9100

.PHONY: setup ovs run test test-fast demo scenarios bench bench-jobs lint format clean

setup:
	@deploy/setup.sh

ovs: setup
	@deploy/start-ovs.sh

run: ovs
	.venv/bin/flowlane up $(if $(POLICY),--policy $(POLICY)) --ofp-port $(OFP_PORT) \
		--api-port $(API_PORT) --metrics-port $(METRICS_PORT)

test: ovs
	@deploy/test.sh

# The tests that need no Open vSwitch, in 4 parallel workers: a signal in about two minutes.
test-fast: setup
	.venv/bin/pytest -m fast -n 4 --dist worksteal

# The isolation scenario under fifo, static and flowlane: report.json, plots and a summary table.
demo: ovs
	.venv/bin/flowlane scenario run isolation --out reports/demo
	@echo "demo report: $(CURDIR)/reports/demo/report.json (plots: reports/demo/*.png)"

# Every shipped scenario at its full duration: the tables of docs/benchmarks.md.
scenarios: ovs
	@set -e; for name in $$(ls mininet/scenarios | sed -n 's/\.yaml$$//p'); do \
		.venv/bin/flowlane scenario run $$name --out reports/bench/$$name; done

# Jobs' placement and inference figures (docs/benchmarks.md, "Jobs") as medians over runs:
# one 20 s window's p99 is decided by whether a stall fell in it.  About 6 min a round.
JOB_ROUNDS ?= 5
bench-jobs: ovs
	rm -rf reports/jobs
	@set -e; for n in $$(seq 1 $(JOB_ROUNDS)); do \
		.venv/bin/flowlane scenario run jobs-fabric --out reports/jobs/jobs-fabric-$$n; \
		.venv/bin/flowlane scenario run mininet/scenarios/variants/jobs-late.yaml \
			--out reports/jobs/jobs-late-$$n; done
	.venv/bin/flowlane scenario compare reports/jobs/jobs-fabric-*/report.json --markdown
	.venv/bin/flowlane scenario compare reports/jobs/jobs-late-*/report.json --markdown

bench: ovs scenarios
	.venv/bin/python -m flowlane_bench.bench_propagation --out bench-propagation.json
	.venv/bin/python -m flowlane_bench.bench_threads --out bench-threads.json
	.venv/bin/python -m flowlane_bench.bench_detection --out bench-detection.json
	.venv/bin/python -m flowlane_bench.bench_classifier
	.venv/bin/python -m flowlane_bench.bench_soak --out bench-soak.json
	.venv/bin/python -m flowlane_bench.bench_api_abuse --out bench-api-abuse.json
	.venv/bin/python -m flowlane_bench.bench_sentinel --out bench-sentinel.json
	.venv/bin/python -m flowlane_bench.bench_takeover --out bench-takeover.json

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy

format: setup
	.venv/bin/ruff format .
	.venv/bin/ruff check --fix .

clean:
	rm -rf .venv .pytest_cache .mypy_cache .ruff_cache *.egg-info bench-*.json reports
