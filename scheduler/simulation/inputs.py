"""The simulator's inputs, checked: the fleet, the workload and the policies.

Pure: they come in as text (the command reads the files) or as generator settings; a bad
input raises InputError with one line naming the file, the line and what is wrong.

Fleet CSV, one host a line, header first: ``name,memory_mb,vcpus,disk_gb`` and optionally
``zone`` (default: the default availability zone), ``aggregates`` (names separated by
``;``) and ``hidden_cores`` (load the scheduler cannot see: other tenants, the host's own
services).

Workload CSV, one instance a line, header first: ``at`` (seconds from the start),
``lifetime`` (seconds; empty: it stays), then either ``flavor`` (a named flavor) or
``memory_mb,vcpus,disk_gb``, and optionally ``busy`` (the share of its vCPUs it keeps busy,
0 to 1; default 0) and ``hints`` (``key=value`` pairs separated by ``;``).

Maintenance CSV, one drain a line, header first: ``at`` (seconds from the start), ``host``
(a host of the fleet) and optionally ``max_parallel`` (migrations off it at once; default 2).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

from berth_contract import flavors


class InputError(ValueError):
    """A bad input; the message is one line."""


@dataclasses.dataclass(frozen=True)
class SimHost:
    name: str
    memory_mb: int
    vcpus: int
    disk_gb: int
    zone: str | None = None
    aggregates: tuple[str, ...] = ()
    hidden_cores: float = 0.0


@dataclasses.dataclass(frozen=True)
class Arrival:
    at: float
    memory_mb: int
    vcpus: int
    disk_gb: int
    lifetime: float | None  # None: it stays to the end
    busy: float = 0.0
    flavor: str | None = None
    hints: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class Drain:
    """Maintenance of ``host`` from ``at``: it takes nothing new, and its instances are moved
    off it, ``max_parallel`` at a time."""

    at: float
    host: str
    max_parallel: int = 2


def _rows(text: str, where: str, required: Sequence[str], optional: Sequence[str]) -> list[tuple[int, dict]]:
    reader = csv.DictReader(io.StringIO(text))
    header = [name.strip() for name in (reader.fieldnames or [])]
    if not header:
        raise InputError(f"{where}: empty: the first line names the columns ({', '.join(required)}...)")
    reader.fieldnames = header
    unknown = [name for name in header if name not in (*required, *optional)]
    if unknown:
        raise InputError(
            f"{where}: line 1: unknown column {unknown[0]!r}; the columns are "
            f"{', '.join((*required, *optional))}"
        )
    missing = [name for name in required if name not in header]
    if missing:
        raise InputError(f"{where}: line 1: no column {missing[0]!r}")
    rows = []
    for row in reader:
        if None in row:
            raise InputError(f"{where}: line {reader.line_num}: more values than columns")
        rows.append((reader.line_num, {k: (v or "").strip() for k, v in row.items()}))
    if not rows:
        raise InputError(f"{where}: no line after the header")
    return rows


def _number(
    value: str, where: str, column: str, integral: bool = False, low: float = 0.0, high: float = math.inf
) -> float:
    if value == "":
        raise InputError(f"{where}: {column}: missing")
    try:
        number = float(value)
    except ValueError:
        raise InputError(f"{where}: {column}: not a number: {value!r}") from None
    if not math.isfinite(number) or not low <= number <= high or (integral and number != int(number)):
        kind = "a whole number" if integral else "a number"
        bound = f"from {low:g}" + (f" to {high:g}" if math.isfinite(high) else "")
        raise InputError(f"{where}: {column}: must be {kind} {bound}, got {value!r}")
    return number


def parse_fleet(text: str, where: str = "fleet") -> list[SimHost]:
    hosts, seen = [], set()
    for line, row in _rows(
        text, where, ("name", "memory_mb", "vcpus", "disk_gb"), ("zone", "aggregates", "hidden_cores")
    ):
        at = f"{where}: line {line}"
        name = row["name"]
        if not name or any(c.isspace() for c in name):
            raise InputError(f"{at}: name: a host name without spaces, got {name!r}")
        if name in seen:
            raise InputError(f"{at}: host {name!r} is named twice")
        seen.add(name)
        hosts.append(
            SimHost(
                name,
                int(_number(row["memory_mb"], at, "memory_mb", True, 1)),
                int(_number(row["vcpus"], at, "vcpus", True, 1)),
                int(_number(row["disk_gb"], at, "disk_gb", True, 0)),
                row.get("zone") or None,
                tuple(a for a in (row.get("aggregates") or "").split(";") if a),
                _number(row.get("hidden_cores") or "0", at, "hidden_cores"),
            )
        )
    return hosts


def generate_fleet(
    count: int,
    sizes: Sequence[tuple[int, int, int]],
    zones: int = 1,
    hidden_cores: float = 0.0,
    hidden_every: int = 3,
) -> list[SimHost]:
    """``count`` hosts, the ``sizes`` (memory_mb, vcpus, disk_gb) in turn, spread over ``zones``
    zones (az1, az2...) when there are more than one; every ``hidden_every``-th host (the
    first included) busy with ``hidden_cores`` cores the scheduler cannot see."""
    return [
        SimHost(
            f"sim-{i:05d}",
            *sizes[i % len(sizes)],
            zone=f"az{i % zones + 1}" if zones > 1 else None,
            hidden_cores=hidden_cores if i % hidden_every == 0 else 0.0,
        )
        for i in range(count)
    ]


def _flavor_sizes(name: str, at: str) -> tuple[int, int, int]:
    flavor = flavors.FLAVORS.get(name)
    if flavor is None:
        raise InputError(f"{at}: flavor: unknown flavor {name!r}; known: {', '.join(flavors.FLAVORS)}")
    return (
        int(flavor["memory_mb"]),
        int(flavor["vcpus"]),
        int(flavor["root_gb"]) + int(flavor["ephemeral_gb"]),
    )


def parse_workload(text: str, where: str = "workload") -> list[Arrival]:
    arrivals = []
    for line, row in _rows(
        text, where, ("at",), ("lifetime", "flavor", "memory_mb", "vcpus", "disk_gb", "busy", "hints")
    ):
        at = f"{where}: line {line}"
        if row.get("flavor"):
            if any(row.get(k) for k in ("memory_mb", "vcpus", "disk_gb")):
                raise InputError(f"{at}: give a flavor or memory_mb/vcpus/disk_gb, not both")
            memory_mb, vcpus, disk_gb = _flavor_sizes(row["flavor"], at)
        elif all(row.get(k) for k in ("memory_mb", "vcpus")):
            memory_mb = int(_number(row["memory_mb"], at, "memory_mb", True, 1))
            vcpus = int(_number(row["vcpus"], at, "vcpus", True, 1))
            disk_gb = int(_number(row.get("disk_gb") or "0", at, "disk_gb", True, 0))
        else:
            raise InputError(f"{at}: no size: give a flavor, or memory_mb and vcpus (and disk_gb)")
        hints = []
        for pair in (row.get("hints") or "").split(";"):
            if not pair:
                continue
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise InputError(f"{at}: hints: key=value pairs separated by ';', got {pair!r}")
            hints.append((key.strip(), value.strip()))
        lifetime = _number(row["lifetime"], at, "lifetime", low=0.0) if row.get("lifetime") else None
        arrivals.append(
            Arrival(
                _number(row["at"], at, "at"),
                memory_mb,
                vcpus,
                disk_gb,
                lifetime,
                _number(row.get("busy") or "0", at, "busy", high=1.0),
                row.get("flavor") or None,
                tuple(hints),
            )
        )
    return sorted(arrivals, key=lambda a: a.at)


def parse_maintenance(text: str, hosts: Sequence[SimHost], where: str = "maintenance") -> list[Drain]:
    """The drains of ``text``, by time; each names a host of ``hosts``, once."""
    names = {host.name for host in hosts}
    drains, seen = [], set()
    for line, row in _rows(text, where, ("at", "host"), ("max_parallel",)):
        at = f"{where}: line {line}"
        host = row["host"]
        if host not in names:
            raise InputError(f"{at}: host: {host!r} is not a host of the fleet")
        if host in seen:
            raise InputError(f"{at}: host: {host!r} is drained twice")
        seen.add(host)
        max_parallel = int(_number(row.get("max_parallel") or "2", at, "max_parallel", True, 1))
        drains.append(Drain(_number(row["at"], at, "at"), host, max_parallel))
    return sorted(drains, key=lambda d: d.at)


def parse_flavor_mix(text: str) -> dict[str, float]:
    """``m1.small=3,m1.medium=1``: flavor names and their weights."""
    mix: dict[str, float] = {}
    for part in text.split(","):
        name, sep, weight = part.partition("=")
        name = name.strip()
        if name not in flavors.FLAVORS:
            raise InputError(f"--flavor-mix: unknown flavor {name!r}; known: {', '.join(flavors.FLAVORS)}")
        mix[name] = _number(weight if sep else "1", "--flavor-mix", name, low=0.0)
    if not sum(mix.values()):
        raise InputError("--flavor-mix: every weight is 0")
    return mix


def generate_workload(
    count: int, rate: float, mix: Mapping[str, float], mean_lifetime: float, busy: float, seed: int = 0
) -> list[Arrival]:
    """``count`` arrivals, Poisson at ``rate`` a second, flavors drawn by ``mix``'s weights,
    lifetimes exponential with ``mean_lifetime`` (0: they stay), each busy with probability
    ``busy`` (keeping all its vCPUs busy) or idle."""
    rng = random.Random(seed)
    names, weights = list(mix), list(mix.values())
    at, arrivals = 0.0, []
    for _ in range(count):
        at += rng.expovariate(rate)
        name = rng.choices(names, weights)[0]
        memory_mb, vcpus, disk_gb = _flavor_sizes(name, "--flavor-mix")
        lifetime = rng.expovariate(1.0 / mean_lifetime) if mean_lifetime > 0 else None
        arrivals.append(
            Arrival(at, memory_mb, vcpus, disk_gb, lifetime, 1.0 if rng.random() < busy else 0.0, name)
        )
    return arrivals


@dataclasses.dataclass(frozen=True)
class SimGroup:
    """A scaling group to simulate: its members are ``flavor``, it starts with ``initial``
    members, and the work it must do is ``load``: busy vCPUs of the whole group over time,
    (seconds, vCPUs) points joined by straight lines, shared equally by its members."""

    name: str
    spec: Any
    memory_mb: int
    vcpus: int
    disk_gb: int
    initial: int
    load: tuple[tuple[float, float], ...]

    def load_at(self, t: float) -> float:
        points = self.load
        if t <= points[0][0]:
            return points[0][1]
        for (t0, v0), (t1, v1) in itertools.pairwise(points):
            if t <= t1:
                return v0 + (v1 - v0) * (t - t0) / (t1 - t0) if t1 > t0 else v1
        return points[-1][1]


def parse_group(text: str, where: str = "scaling group") -> SimGroup:
    """A scaling group from JSON: {"name", "flavor", "initial", "spec" (as what-if takes it;
    the cpu metric only), "load": [[seconds, busy vCPUs], ...]}."""
    import json

    from scheduler.scaling.spec import CPU, RESOURCE, SpecError, parse_spec

    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{where}: not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"{where}: a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - {"name", "flavor", "initial", "spec", "load"})
    if unknown:
        raise InputError(
            f"{where}: unknown key {unknown[0]!r}; the keys are name, flavor, initial, spec, load"
        )
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise InputError(f"{where}: name: a name, got {name!r}")
    if not isinstance(data.get("flavor"), str):
        raise InputError(
            f"{where}: flavor: a named flavor ({', '.join(flavors.FLAVORS)}), got {data.get('flavor')!r}"
        )
    memory_mb, vcpus, disk_gb = _flavor_sizes(data["flavor"], where)
    try:
        spec = parse_spec(data.get("spec"), f"{where}: spec")
    except SpecError as exc:
        raise InputError(str(exc)) from None
    if any(m.type != RESOURCE or m.name != CPU for m in spec.metrics):
        raise InputError(f"{where}: spec: metrics: berth simulate reads the cpu resource metric only")
    initial = data.get("initial", spec.min)
    if isinstance(initial, bool) or not isinstance(initial, int) or not spec.min <= initial <= spec.max:
        raise InputError(
            f"{where}: initial: a whole number from min ({spec.min}) to max ({spec.max}), got {initial!r}"
        )
    points = data.get("load")
    if (
        not isinstance(points, list)
        or not points
        or not all(
            isinstance(p, list)
            and len(p) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in p)
            for p in points
        )
    ):
        raise InputError(f"{where}: load: a list of [seconds, busy vCPUs] pairs, got {points!r}")
    load = tuple((float(t), float(v)) for t, v in points)
    if any(b[0] < a[0] for a, b in itertools.pairwise(load)) or any(
        v < 0 or not math.isfinite(v) for _, v in load
    ):
        raise InputError(f"{where}: load: times in order, and loads of at least 0")
    return SimGroup(name, spec, memory_mb, vcpus, disk_gb, initial, load)
