"""The known-slow tests first, spread over the pytest-xdist workers (``--dist worksteal``).

worksteal hands each worker one contiguous share of the collection at the start
(``len(pending) // workers_left`` items each, in order) and later lets an idle worker take
the *tail* of the longest queue.  A slow test at the end of a share is never taken away
from it and ends the run late; a slow test at the head of a share starts at once while the
other workers take over the rest of that share.  So each worker's share starts with a
few of the known-slow tests, dealt longest first to the least loaded share, and the rest of
the collection fills the shares in its own order.

A key of ``SLOW_S`` is a test's node id, or a module's path or a class's node id
(``path::Class``): a module or a class whose tests share a module- or class-scoped fixture
(the packaging test's clean venv, ``flowlane up``'s five restarts) moves whole, so that the
fixture is built once, on one worker.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

SLOW_S: Mapping[str, float] = {
    # Seconds (setup and call), from one run of the fast tier on 4 workers on 2 cores
    # (2026-12-05 16:31 UTC, beside other work on the machine); only their order matters.
    "tests/cli/test_up.py::TestRestarts": 38,  # five flowlane up in turn, read by 3 tests
    "tests/test_packaging.py": 30,  # one clean venv for the module's three tests
    "tests/api/test_killed_mid_put.py::test_a_put_is_stored_whole_or_not_at_all": 22,
    "tests/cli/test_up.py::test_up_restarts_dead_children_and_keeps_its_data": 15,
    "tests/api/test_health.py::test_readyz_turns_503_within_the_max_age_of_a_killed_controller": 7,
    "tests/api/test_body_limits.py::test_hostile_bodies_leave_the_api_responsive_and_its_memory"
    "_as_it_was": 7,
    "tests/cli/test_stack_secrets.py::TestOneEphemeralStack": 7,  # one stack, two tests
    "tests/mastership/test_seen_from_outside.py::test_the_master_killed_its_switch_taken_and"
    "_everyone_can_see_it": 5,
    "tests/test_logs.py::test_the_api_logs_json_lines_and_no_access_log_by_default": 5,
    "tests/api/test_abuse.py::test_long_unknown_paths_cost_the_audit_log_a_bounded_entry_each": 5,
    "tests/api/test_schemathesis.py::test_no_input_makes_a_server_error"
    "[PUT /v1/policy positive]": 5,
    "tests/api/test_schemathesis.py::test_no_input_makes_a_server_error"
    "[PUT /v1/policy negative]": 4,
    "tests/auth/test_dpid_binding.py::test_a_certified_switch_claiming_another_dpid_is_refused": 3,
}
"""Node id, class node id or module path → seconds.  A name that no longer exists is ignored."""


def shares(count: int, workers: int) -> list[int]:
    """How many of ``count`` tests worksteal hands each of ``workers`` at the start."""
    sizes = []
    left = count
    for remaining in range(workers, 0, -1):
        sizes.append(left // remaining)
        left -= sizes[-1]
    return sizes


def slow_first(nodeids: Sequence[str], workers: int, slow_s: Mapping[str, float]) -> list[int]:
    """A permutation of ``range(len(nodeids))``: each worker's share led by slow tests."""
    blocks: dict[str, list[int]] = {}  # a key of slow_s → the tests it moves, in order
    for index, nodeid in enumerate(nodeids):
        parts = nodeid.split("::")
        prefixes = ("::".join(parts[:end]) for end in range(len(parts), 0, -1))
        key = next((prefix for prefix in prefixes if prefix in slow_s), None)  # longest first
        if key is not None:
            blocks.setdefault(key, []).append(index)
    if workers < 2 or not blocks:
        return list(range(len(nodeids)))
    sizes = shares(len(nodeids), workers)
    heads: list[list[int]] = [[] for _ in sizes]
    loads = [0.0] * len(sizes)
    for key in sorted(blocks, key=lambda k: (-slow_s[k], k)):
        share = min(range(len(sizes)), key=lambda s: (loads[s], s))
        heads[share] += blocks[key]
        loads[share] += slow_s[key]
    moved = {i for head in heads for i in head}
    rest = iter(i for i in range(len(nodeids)) if i not in moved)
    order: list[int] = []
    for head, size in zip(heads, sizes, strict=True):
        order += head
        order += itertools.islice(rest, max(0, size - len(head)))
    order += list(rest)
    return order
