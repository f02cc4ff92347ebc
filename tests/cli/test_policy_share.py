"""`flowlane policy show` says how each class is shared: per flow (default) or per job."""

from __future__ import annotations

from controller.cli import policy


def test_show_lists_each_classes_share() -> None:
    body = {
        "version": 3,
        "author": "ops",
        "created_at": 1_700_000_000.0,
        "policy": {
            "classes": {
                "training": {"priority": 1, "dscp": 26, "min_rate": "70%", "share": "per-job"},
                "best-effort": {"priority": 2, "dscp": 0, "min_rate": "10%"},
            },
            "default_class": "best-effort",
        },
    }
    with policy.out.capture() as captured:
        policy.render_policy(body)
    rows = {line.split("│")[1].strip(): line for line in captured.get().splitlines() if "│" in line}
    assert "per-job" in rows["training"]
    assert "per-flow" in rows["best-effort"]
