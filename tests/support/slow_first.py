"""The known-slow tests first, spread over the pytest-xdist workers (``--dist worksteal``).

worksteal hands each worker one contiguous share of the collection at the start
(``len(pending) // workers_left`` items each, in order) and later lets an idle worker take
the *tail* of the longest queue.  A slow test at the end of a share is never taken away
from it and ends the run late; a slow test at the head of a share starts at once while the
other workers take over the rest of that share.  So each worker's share starts with a
few of the known-slow tests, dealt longest first to the least loaded share, and the rest of
the collection fills the shares in its own order.

A key of ``SLOW_S`` is a test's node id, or a module's path: a module whose tests share a
module-scoped fixture (the packaging test's clean venv) moves whole, so that the fixture is
built once, on one worker.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

SLOW_S: Mapping[str, float] = {
    # Seconds (setup and call), from one run of the fast tier on 4 workers on 2 cores
    # (2026-12-05, beside other work on the machine); only their order matters.
    "tests/cli/test_up.py::test_policy_on_a_store_with_a_policy_becomes_the_next_version": 37,
    "tests/test_packaging.py": 24,  # one clean venv for the module's three tests
    "tests/api/test_killed_mid_put.py::test_a_put_is_stored_whole_or_not_at_all": 18,
    "tests/cli/test_up.py::test_up_restarts_dead_children_and_keeps_its_data": 18,
    "tests/cli/test_up.py::test_the_token_line_tells_a_restart_from_a_first_start": 13,
    "tests/cli/test_stack_secrets.py::test_an_ephemeral_stack_leaves_the_persistent_token"
    "_alone_and_its_token_expires": 7,
    "tests/api/test_health.py::test_readyz_turns_503_within_the_max_age_of_a_killed_controller": 6,
    "tests/cli/test_stack_secrets.py::test_no_log_or_answer_carries_the_redis_password"
    "_or_a_token": 6,
    "tests/api/test_body_limits.py::test_hostile_bodies_leave_the_api_responsive_and_its_memory"
    "_as_it_was": 5,
    "tests/mastership/test_assign.py::test_balanced_sticky_and_deterministic": 5,
    "tests/api/test_abuse.py::test_long_unknown_paths_cost_the_audit_log_a_bounded_entry_each": 5,
    "tests/cli/test_up.py::test_the_banner_names_a_flowlane_that_runs_as_pasted": 4,
    "tests/auth/test_dpid_binding.py::test_a_certified_switch_claiming_another_dpid_is_refused": 4,
}
"""Node id or module path → seconds.  A name that no longer exists is ignored."""


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
        module = nodeid.split("::", 1)[0]
        key = nodeid if nodeid in slow_s else module if module in slow_s else None
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
