"""PNG plots of a report: latency CDF per mode, throughput per class over time, all-reduce times.

Made from ``report.json`` alone (``write_plots`` takes the model), so a
report can be re-plotted without re-running it.  Matplotlib runs headless
(Agg): scenario runs happen on machines without a display.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from flowlane_bench.suite.report import ALONE, CONTROL, IDLE, Report

LATENCY_CDF = "latency-cdf.png"
THROUGHPUT = "throughput.png"
ALLREDUCE = "allreduce.png"
_COLORS = {
    IDLE: "grey",
    ALONE: "grey",
    CONTROL: "black",
    "fifo": "tab:red",
    "static": "tab:orange",
    "flowlane": "tab:blue",
    "stp": "tab:brown",
    "ecmp": "tab:olive",
}


def _title(report: Report, what: str) -> str:
    return f"{report.scenario}: {what} ({report.capacity_bps / 1e6:g} Mbit/s bottleneck)"


def latency_cdf(report: Report, path: Path) -> None:
    """Inference latency CDF per mode against idle and control; log x keeps the tails readable."""
    figure, axes = plt.subplots(figsize=(7, 4.2))
    for name in [IDLE, CONTROL, *report.modes]:
        if name not in report.phases:
            continue
        inference = report.phases[name].inference
        if inference is None or not inference.cdf:
            continue
        xs, ys = zip(*inference.cdf, strict=True)
        label = f"{name} (p99 {inference.latency_ms.p99:.2f} ms)"
        style = {IDLE: "--", CONTROL: ":"}.get(name, "-")
        axes.step(xs, ys, where="post", label=label, linestyle=style, color=_COLORS.get(name))
    axes.set_xscale("log")
    axes.set_xlabel("inference request latency (ms, log scale)")
    axes.set_ylabel("fraction of requests")
    axes.set_ylim(0, 1.01)
    axes.axhline(0.99, color="black", linewidth=0.5, linestyle=":")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(loc="lower right", fontsize="small")
    axes.set_title(_title(report, "inference latency CDF"), fontsize="medium")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def throughput(report: Report, path: Path) -> None:
    """Training and inference throughput over time, one panel per mode."""
    names = report.modes
    figure, panels = plt.subplots(len(names), 1, figsize=(7, 1.9 * len(names) + 0.6), sharex=True)
    panel_list = list(panels) if len(names) > 1 else [panels]
    for axes, name in zip(panel_list, names, strict=True):
        for klass, color in (("training", "tab:green"), ("inference", "tab:purple")):
            series = report.phases[name].timeline.get(klass)
            if series:
                xs, ys = zip(*series, strict=True)
                axes.plot(xs, [y / 1e6 for y in ys], label=klass, color=color)
        axes.axhline(report.capacity_bps / 1e6, color="black", linewidth=0.6, linestyle=":")
        if report.optimum_bps:
            axes.axhline(report.optimum_bps / 1e6, color="tab:green", linewidth=0.6, linestyle="--")
        for event in report.phases[name].events:
            axes.axvline(
                event.executed_s,
                color="tab:red" if event.state == "down" else "tab:cyan",
                linewidth=0.8,
                linestyle="--",
            )
        axes.set_ylabel(f"{name}\nMbit/s")
        axes.grid(True, alpha=0.3)
    panel_list[0].legend(loc="upper right", fontsize="small")
    what = "throughput per class" + (
        " (dashed: optimum; red/cyan: link down/up)" if report.optimum_bps else ""
    )
    panel_list[0].set_title(_title(report, what), fontsize="medium")
    panel_list[-1].set_xlabel("seconds since training started (inference starts after the ramp)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def allreduce(report: Report, path: Path) -> bool:
    """All-reduce iteration times per mode, training alone first; False when there is none."""
    names = [
        name
        for name in [ALONE, *report.modes]
        if name in report.phases and report.phases[name].allreduce
    ]
    if not names:
        return False
    figure, axes = plt.subplots(figsize=(7, 4))
    data = [[t for a in report.phases[name].allreduce for t in a.iteration_ms] for name in names]
    boxes = axes.boxplot(data, patch_artist=True, showfliers=True)
    axes.set_xticks(range(1, len(names) + 1), names)
    for patch, name in zip(boxes["boxes"], names, strict=True):
        patch.set_facecolor(_COLORS.get(name, "white"))
        patch.set_alpha(0.5)
    axes.set_ylabel("iteration time (ms)")
    axes.grid(True, axis="y", alpha=0.3)
    axes.set_title(_title(report, "all-reduce iteration time"), fontsize="medium")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def write_plots(report: Report, directory: Path) -> list[str]:
    """Every plot the report has data for; returns their file names."""
    latency_cdf(report, directory / LATENCY_CDF)
    throughput(report, directory / THROUGHPUT)
    written = [LATENCY_CDF, THROUGHPUT]
    if allreduce(report, directory / ALLREDUCE):
        written.append(ALLREDUCE)
    return written
