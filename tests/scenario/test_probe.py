"""Probe streams: lost datagrams, loss in milliseconds, the longest silence, per event window."""

from __future__ import annotations

from typing import Any

import pytest
from flowlane_bench.suite.probe import (
    ProbeOutputError,
    ProbeRun,
    due,
    loss,
    probe_run,
    windows,
)

START = 1_000.0
RATE = 1000


def sender(sent: int = 3000) -> dict[str, Any]:
    """``probe.py send`` at 1000/s for ``sent`` datagrams, as it prints its report."""
    return {"rate": float(RATE), "size": 64, "start_unix": START, "sent": sent, "send_errors": 0}


def receiver(seqs: list[int], delay_s: float = 0.0002) -> dict[str, Any]:
    """Each datagram arrives ``delay_s`` after it was due."""
    return {
        "port": 7000,
        "received": len(seqs),
        "arrivals": [[s, START + s / RATE + delay_s] for s in seqs],
    }


def outage(first: int, last: int, sent: int = 3000) -> list[int]:
    """Every datagram but ``first`` .. ``last - 1``."""
    return [s for s in range(sent) if not first <= s < last]


def test_a_clean_stream_loses_nothing() -> None:
    run = probe_run(sender(), receiver(list(range(3000))))
    result = loss(run)
    assert (result.sent, result.received, result.lost, result.loss_ms) == (3000, 3000, 0, 0.0)
    assert result.longest_gap_ms == pytest.approx(1.0)


def test_an_outage_is_lost_datagrams_and_milliseconds() -> None:
    run = probe_run(sender(), receiver(outage(1000, 1042)))
    result = loss(run)
    assert result.lost == 42
    assert result.loss_ms == 42.0  # 42 datagrams at 1000/s
    assert result.longest_gap_ms == pytest.approx(43.0)  # 999 -> 1042


def test_loss_ms_scales_with_the_rate() -> None:
    report = sender(1000) | {"rate": 500.0}
    arrivals = {"arrivals": [[s, START + s / 500] for s in range(1000) if not 100 <= s < 110]}
    result = loss(probe_run(report, arrivals))
    assert result.lost == 10 and result.loss_ms == 20.0


def test_duplicates_count_once_and_reordering_is_not_loss() -> None:
    seqs = [0, 2, 1, 1, 3, 4]
    run = probe_run(sender(5), receiver(seqs))
    assert loss(run).lost == 0 and loss(run).received == 5


def test_windows_charge_each_event_its_own_losses() -> None:
    # Failure at 1.0 s costs 42 datagrams, repair at 2.0 s costs 5.
    seqs = [s for s in outage(1000, 1042) if not 2000 <= s < 2005]
    run = probe_run(sender(), receiver(seqs))
    first, second = windows(run, [START + 1.0, START + 2.0])
    assert (first.sent, first.lost, first.loss_ms) == (1000, 42, 42.0)
    assert first.longest_gap_ms == pytest.approx(43.0)
    assert (second.sent, second.lost, second.loss_ms) == (1000, 5, 5.0)
    assert second.longest_gap_ms == pytest.approx(6.0)
    assert loss(run).lost == 47


def test_a_gap_is_charged_to_the_window_it_ends_in() -> None:
    # Silence from 0.95 s to 1.10 s; the event window starts at 1.0 s.
    run = probe_run(sender(), receiver(outage(950, 1100)))
    before, after = loss(run, START, START + 1.0), loss(run, START + 1.0)
    assert before.lost == 50 and after.lost == 100
    assert before.longest_gap_ms == pytest.approx(1.0)
    assert after.longest_gap_ms == pytest.approx(151.0)


def test_due_times_follow_the_schedule() -> None:
    run = ProbeRun(rate=1000, start_unix=START, sent=10, arrivals=())
    assert due(run, 0) == START and due(run, 250) == START + 0.25


def test_a_stream_with_no_arrivals_lost_everything() -> None:
    result = loss(probe_run(sender(100), {"arrivals": []}))
    assert result.lost == 100 and result.loss_ms == 100.0 and result.longest_gap_ms == 0.0


@pytest.mark.parametrize(
    ("sent_report", "received_report", "message"),
    [
        ({"rate": 1000, "start_unix": START}, {"arrivals": []}, "lacks"),
        (sender(), {}, "lacks"),
        (sender() | {"rate": 0}, {"arrivals": []}, "must be positive"),
        (sender(10), {"arrivals": [[10, START]]}, "never sent"),
        (sender(10), {"arrivals": [["x", START]]}, "garbles"),
    ],
)
def test_unreadable_reports_are_refused(
    sent_report: dict[str, Any], received_report: dict[str, Any], message: str
) -> None:
    with pytest.raises(ProbeOutputError, match=message):
        probe_run(sent_report, received_report)


def test_the_probe_tool_reports_what_the_parser_reads() -> None:
    """``flowlane_bench.probe`` over loopback: its two reports make a lossless run."""
    import json
    import socket
    import subprocess
    import sys

    probe = [sys.executable, "-m", "flowlane_bench.probe"]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    receiving = subprocess.Popen(
        [*probe, "receive", "--port", str(port), "--duration", "1.5"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert receiving.stdout is not None
        assert receiving.stdout.readline().strip() == "listening"
        sent = subprocess.run(
            [
                *probe,
                "send",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--rate",
                "2000",
                "--count",
                "500",
                "--size",
                "100",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        )
        out, _ = receiving.communicate(timeout=10)
    finally:
        receiving.kill()
    report = json.loads(sent.stdout)
    assert report["sent"] == 500 and report["size"] == 100 and report["rate"] == 2000
    run = probe_run(report, json.loads(out.splitlines()[-1]))
    result = loss(run)
    assert (result.sent, result.lost) == (500, 0)
    assert all(at >= due(run, seq) - 0.01 for seq, at in run.arrivals)
