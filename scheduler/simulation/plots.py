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


#: Line styles by the number of earlier policies whose series is the same: the later lines stay
#: visible over the one they coincide with.
_SAME_STYLES = ("-", "--", ":", "-.")


def _over_time(results: Sequence[Result], path: pathlib.Path, series: str, title: str, ylabel: str,
               counts: bool = False) -> Any:
    """One line per policy: ``series`` of its result at each report, against minutes. A series
    the same as an earlier policy's is drawn dashed over it and says so in the legend;
    ``counts``: whole numbers from 0 (a flat 0 gets an axis from 0 to 1)."""
    figure, [[axes]] = _figure()
    drawn: list[tuple[str, list[Any]]] = []
    for result in results:
        values = list(getattr(result, series))
        same = [policy for policy, earlier in drawn if earlier == values]
        label = result.policy + (f" (the same as {', '.join(same)})" if same else "")
        axes.plot([t / 60 for t in result.times], values, label=label,
                  linestyle=_SAME_STYLES[len(same) % len(_SAME_STYLES)], linewidth=2.5 if not same else 1.8)
        drawn.append((result.policy, values))
    axes.set(title=title, xlabel="minutes", ylabel=ylabel)
    if counts:
        from matplotlib.ticker import MaxNLocator

        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        top = max(1, max((max(values, default=0) for _, values in drawn), default=0) * 1.05)
        axes.set_ylim(-0.02 * top, top)  # a line at 0 above the frame, not hidden by it
    axes.legend()
    return _save(figure, path)


def skew(results: Sequence[Result], path: pathlib.Path) -> Any:
    return _over_time(results, path, "skews", "Real-load skew (max / mean across hosts)", "skew")


def refusals(results: Sequence[Result], path: pathlib.Path) -> Any:
    return _over_time(results, path, "refusals", "Instances refused so far", "refused", counts=True)


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


#: The most host names a heat map's axis prints.
MAX_HOST_LABELS = 40


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
    names = result.host_names
    if names and len(names) == loads.shape[0]:
        # Every host named while the names can be read; beyond that, evenly spaced ones.
        step = max(1, -(-len(names) // MAX_HOST_LABELS))
        rows = list(range(0, len(names), step))
        axes.set_yticks([row + 0.5 for row in rows], [names[row] for row in rows],
                        fontsize="small" if len(rows) <= 20 else "x-small")
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
