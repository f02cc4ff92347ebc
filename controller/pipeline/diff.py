"""What to send so a switch ends with exactly the planned flows."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from controller.pipeline import tables
from controller.pipeline.flows import FlowEntry, FlowKey, InstalledFlow


@dataclass(frozen=True, slots=True)
class FlowDiff:
    """``add`` covers new and changed entries (an OpenFlow ADD replaces an entry
    with the same key); ``delete`` lists entries the plan no longer has."""

    add: tuple[FlowEntry, ...]
    delete: tuple[FlowKey, ...]
    unchanged: int
    delete_by_cookie: tuple[tuple[int, int], ...] = ()
    """(table, cookie) of foreign entries whose match flowlane cannot re-encode."""

    @property
    def empty(self) -> bool:
        return not self.add and not self.delete and not self.delete_by_cookie


_RECENT: dict[tuple[int, int], tuple[tuple[object, ...], tuple[object, ...], FlowDiff]] = {}
"""Diffs by the identity of both plans (kept alive here, so ids are not reused).

After a policy change every switch that confirmed the same plan diffs it against the same
new plan (``BasePlans`` shares both among switches alike): one diff serves them all.  Any
actor thread may read or fill it; a lost race costs one diff."""
_RECENT_MAX = 16


def diff_flows(
    installed: Iterable[InstalledFlow | FlowEntry], planned: Iterable[FlowEntry]
) -> FlowDiff:
    """Compare by key (table, priority, match); equal cookies mean equal content.

    Entries someone else installed are deleted too: the plan owns the whole
    switch, and a stray entry (OVS's default ``NORMAL`` flow, a leftover of
    an older plan) would otherwise bypass classification.  The one exception
    is the counting table, whose entries OVS learns by itself.
    """
    if not (isinstance(installed, tuple) and isinstance(planned, tuple)):
        return _diff(installed, planned)
    key = (id(installed), id(planned))
    known = _RECENT.get(key)
    if known is not None and known[0] is installed and known[1] is planned:
        return known[2]
    found = _replaced_in_place(installed, planned)
    if found is None:
        found = _diff(installed, planned)
    if len(_RECENT) >= _RECENT_MAX:
        _RECENT.clear()
    _RECENT[key] = (installed, planned, found)
    return found


def _diff(installed: Iterable[InstalledFlow | FlowEntry], planned: Iterable[FlowEntry]) -> FlowDiff:
    flows = [flow for flow in installed if flow.key.table_id != tables.COUNT]
    have = {flow.key: flow.cookie for flow in flows if not flow.opaque}
    opaque = tuple(sorted({(flow.key.table_id, flow.cookie) for flow in flows if flow.opaque}))
    want: dict[FlowKey, FlowEntry] = {}
    for flow in planned:
        if flow.key in want and want[flow.key] != flow:
            raise ValueError(f"plan has two different entries for {flow.key}")
        want[flow.key] = flow
    add = tuple(flow for key, flow in want.items() if have.get(key) != flow.cookie)
    delete = tuple(sorted(key for key in have if key not in want))
    return FlowDiff(add=add, delete=delete, unchanged=len(want) - len(add), delete_by_cookie=opaque)


def _replaced_in_place(
    installed: tuple[InstalledFlow | FlowEntry, ...], planned: tuple[FlowEntry, ...]
) -> FlowDiff | None:
    """The diff when ``installed`` is the last confirmed plan and ``planned`` replaces some of
    its entries in place (same position, same key); None when it is anything else.

    That is what a policy change makes: the planner reuses the entries of unchanged rules, so
    the new plan is the old one, object for object, but for the entries of the edited rule.
    Ten switches diff four hundred entries each after every change; comparing positions by
    identity skips hashing every key of both plans. Same result as the general diff.
    """
    if len(installed) != len(planned):
        return None
    changed = [
        i for i, (old, new) in enumerate(zip(installed, planned, strict=True)) if old is not new
    ]
    if len(changed) > len(planned) // 4:
        return None
    add: list[FlowEntry] = []
    for i in changed:
        old, new = installed[i], planned[i]
        if not isinstance(old, FlowEntry) or old.key != new.key:
            return None
        if old.cookie != new.cookie:
            add.append(new)
    if any(flow.key.table_id == tables.COUNT for flow in planned):
        return None  # the general diff never counts the counting table as installed
    return FlowDiff(add=tuple(add), delete=(), unchanged=len(planned) - len(add))
