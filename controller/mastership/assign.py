"""Which live instance masters which switch: balanced, sticky, deterministic.

Every instance computes the same answer from the same reading of Redis (the live
instances, the switches each is connected to, the current owners), so no
election is needed: ``assign`` is a pure function of that reading.

- Sticky: a switch keeps its current owner while that owner is live and
  connected to it, unless balance needs it elsewhere.
- Balanced within one switch: among instances that could take a switch, the
  numbers mastered differ by at most one wherever connectivity allows.
- No storm: only the moves balance needs are made (a new instance takes its
  share, the others keep the rest), and a dead instance's switches go to the
  least loaded.
- Nothing lost in a hand-over: a switch whose owner is live moves only to an
  instance *ready* for it (it has followed the switch for one link timeout and read
  the hosts the others published: ``controller.openflow.fabric_owner``), so a
  starting instance takes its share once it knows the fabric, not before.  A switch
  without a live owner goes to a ready instance if one can take it, else to any:
  a switch with no master at all is worse than one mastered from a partial view.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Set


def _spread(dpid: int, instance: str) -> bytes:
    """A tie-break that differs per switch, so ties do not all go to one instance."""
    return hashlib.blake2b(f"{dpid:016x}/{instance}".encode(), digest_size=8).digest()


def assign(
    instances: Mapping[str, Set[int]],
    current: Mapping[int, str],
    ready: Mapping[str, Set[int]] | None = None,
) -> dict[int, str]:
    """The owner of every switch some live instance is connected to.

    ``instances``: live instance id -> the switches it is connected to.
    ``current``: switch -> its owner now (owners not live, or not connected to it, are
    ignored).  Switches no live instance is connected to are left out.
    ``ready``: live instance id -> the switches it is ready to master (None, or an
    instance missing: every switch it is connected to).
    """

    def is_ready(instance: str, dpid: int) -> bool:
        return ready is None or instance not in ready or dpid in ready[instance]

    candidates: dict[int, list[str]] = {}
    for instance in sorted(instances):
        for dpid in instances[instance]:
            candidates.setdefault(dpid, []).append(instance)
    load: dict[str, int] = dict.fromkeys(instances, 0)
    owner: dict[int, str] = {}
    for dpid in sorted(candidates):
        holder = current.get(dpid)
        if holder is not None and holder in candidates[dpid]:
            owner[dpid] = holder
            load[holder] += 1
    for dpid in sorted(candidates):
        if dpid not in owner:
            chosen = min(
                candidates[dpid],
                key=lambda i: (not is_ready(i, dpid), load[i], _spread(dpid, i)),
            )
            owner[dpid] = chosen
            load[chosen] += 1
    movable = {dpid: [i for i in found if is_ready(i, dpid)] for dpid, found in candidates.items()}
    _balance(owner, load, movable)
    return owner


def _balance(
    owner: dict[int, str], load: dict[str, int], candidates: Mapping[int, list[str]]
) -> None:
    """Move switches from the most to the least loaded instance while they differ by more
    than one.  Each move lowers the sum of squared loads, so this ends."""
    while True:
        move = _next_move(owner, load, candidates)
        if move is None:
            return
        dpid, to = move
        load[owner[dpid]] -= 1
        load[to] += 1
        owner[dpid] = to


def _next_move(
    owner: Mapping[int, str], load: Mapping[str, int], candidates: Mapping[int, list[str]]
) -> tuple[int, str] | None:
    heavy_first = sorted(load, key=lambda i: (-load[i], i))
    light_first = sorted(load, key=lambda i: (load[i], i))
    for heavy in heavy_first:
        for light in light_first:
            if load[heavy] - load[light] <= 1:
                break
            movable = [d for d, o in owner.items() if o == heavy and light in candidates[d]]
            if movable:
                return min(movable, key=lambda d: _spread(d, light)), light
    return None


def counts(owner: Mapping[int, str]) -> dict[str, int]:
    """Switches mastered per instance (for logs and tests)."""
    result: dict[str, int] = {}
    for instance in owner.values():
        result[instance] = result.get(instance, 0) + 1
    return result
