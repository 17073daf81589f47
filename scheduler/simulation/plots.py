"""``berth simulate --plot DIR``: PNG plots of the results (matplotlib, Agg backend: no
display needed). Each function returns the figure it saved, for the tests to read."""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from typing import Any

from scheduler.simulation.engine import Result


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def skew(results: Sequence[Result], path: pathlib.Path) -> Any:
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(9, 4.5))
    for result in results:
        axes.plot([t / 60 for t in result.times], result.skews, label=result.policy)
    axes.set(title="Real-load skew (max / mean across hosts)", xlabel="minutes", ylabel="skew")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return figure


def refusals(results: Sequence[Result], path: pathlib.Path) -> Any:
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(9, 4.5))
    for result in results:
        axes.plot([t / 60 for t in result.times], result.refusals, label=result.policy)
    axes.set(title="Instances refused so far", xlabel="minutes", ylabel="refused")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return figure


def utilization(results: Sequence[Result], path: pathlib.Path) -> Any:
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(9, 4.5))
    bins = [i / 20 for i in range(21)]
    for result in results:
        axes.hist(result.final_ram_use, bins=bins, histtype="step", linewidth=2, label=result.policy)
    axes.set(
        title="Hosts by share of their RAM allocated, at the end",
        xlabel="share of RAM allocated",
        ylabel="hosts",
    )
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return figure


def heatmap(result: Result, path: pathlib.Path) -> Any:
    import numpy as np

    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(9, 5))
    loads = np.array(result.loads).T if result.loads else np.zeros((1, 1))
    end = result.times[-1] / 60 if result.times else 1
    image = axes.imshow(
        loads,
        aspect="auto",
        interpolation="nearest",
        cmap="RdYlGn_r",
        vmin=0,
        vmax=1,
        extent=(0, end, loads.shape[0], 0),
    )
    axes.set(
        title=f"{result.policy}: each host's real load (share of its vCPUs busy)",
        xlabel="minutes",
        ylabel="host",
    )
    figure.colorbar(image, ax=axes, label="load")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return figure


def groups(results: Sequence[Result], path: pathlib.Path) -> Any:
    plt = _pyplot()
    names = list(dict.fromkeys(g.name for r in results for g in r.groups))
    figure, all_axes = plt.subplots(len(names), 1, figsize=(9, 3.2 * len(names)), squeeze=False)
    for axes, name in zip([a[0] for a in all_axes], names, strict=True):
        for result in results:
            for group in (g for g in result.groups if g.name == name):
                [line] = axes.plot(
                    [t / 60 for t in group.times], group.members, label=f"{result.policy} members"
                )
                axes.plot(
                    [t / 60 for t in group.times],
                    group.desired,
                    linestyle="--",
                    color=line.get_color(),
                    label=f"{result.policy} desired",
                )
        axes.set(title=f"Scaling group {name}", xlabel="minutes", ylabel="members")
        axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return figure


def write_all(results: Sequence[Result], directory: pathlib.Path) -> list[pathlib.Path]:
    """Every plot into ``directory`` (made if need be); the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, draw in (("skew.png", skew), ("refusals.png", refusals), ("utilization.png", utilization)):
        draw(results, directory / name)
        written.append(directory / name)
    if any(result.groups for result in results):
        groups(results, directory / "scaling-groups.png")
        written.append(directory / "scaling-groups.png")
    for result in results:
        path = directory / f"heatmap-{_file_name(result.policy)}.png"
        heatmap(result, path)
        written.append(path)
    return written


def _file_name(policy: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in policy)
