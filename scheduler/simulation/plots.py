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


def _figure(height: float = 4.5, rows: int = 1) -> tuple[Any, Any]:
    return _pyplot().subplots(rows, 1, figsize=(9, height * rows), squeeze=False)


def _save(figure: Any, path: pathlib.Path) -> Any:
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    _pyplot().close(figure)
    return figure


def _over_time(results: Sequence[Result], path: pathlib.Path, series: str, title: str, ylabel: str) -> Any:
    """One line per policy: ``series`` of its result at each report, against minutes."""
    figure, [[axes]] = _figure()
    for result in results:
        axes.plot([t / 60 for t in result.times], getattr(result, series), label=result.policy)
    axes.set(title=title, xlabel="minutes", ylabel=ylabel)
    axes.legend()
    return _save(figure, path)


def skew(results: Sequence[Result], path: pathlib.Path) -> Any:
    return _over_time(results, path, "skews", "Real-load skew (max / mean across hosts)", "skew")


def refusals(results: Sequence[Result], path: pathlib.Path) -> Any:
    return _over_time(results, path, "refusals", "Instances refused so far", "refused")


def utilization(results: Sequence[Result], path: pathlib.Path) -> Any:
    figure, [[axes]] = _figure()
    bins = [i / 20 for i in range(21)]
    for result in results:
        axes.hist(result.final_ram_use, bins=bins, histtype="step", linewidth=2, label=result.policy)
    axes.set(
        title="Hosts by share of their RAM allocated, at the end",
        xlabel="share of RAM allocated",
        ylabel="hosts",
    )
    axes.legend()
    return _save(figure, path)


def groups(results: Sequence[Result], path: pathlib.Path) -> Any:
    names = list(dict.fromkeys(g.name for r in results for g in r.groups))
    figure, all_axes = _figure(3.2, len(names))
    for [axes], name in zip(all_axes, names, strict=True):
        for result in results:
            for group in (g for g in result.groups if g.name == name):
                minutes = [t / 60 for t in group.times]
                [line] = axes.plot(minutes, group.members, label=f"{result.policy} members")
                axes.plot(
                    minutes,
                    group.desired,
                    linestyle="--",
                    color=line.get_color(),
                    label=f"{result.policy} desired",
                )
        axes.set(title=f"Scaling group {name}", xlabel="minutes", ylabel="members")
        axes.legend(fontsize="small")
    return _save(figure, path)


def heatmap(result: Result, path: pathlib.Path) -> Any:
    import numpy as np

    figure, [[axes]] = _figure(5.0)
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
    return _save(figure, path)


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
