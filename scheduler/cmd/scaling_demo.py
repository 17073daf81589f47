"""``berth-all-in-one --demo-scaling``: a scaling group grows under load and shrinks after it,
in under a minute, on the embedded default (SQLite, in-process broker, fake agents).

The demo shortens the controller's periods (a sync every 2 s, samples every second, members
trusted as soon as they are ACTIVE) and gives its group a quick behavior; everything else is
the daemon's own code: the group is created through the scheduler's RPC API, the load is set
on the fake agents through theirs, and the controller decides and acts as in production.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TextIO

from compute_agent.client import ComputeClient
from scheduler import states
from scheduler.cmd.waiting import wait_until

GROUP = "demo-web"
FLAVOR = "m1.small"
TARGET = 50  # percent of the members' vCPUs
UP_STEP, UP_PERIOD_S, DOWN_WINDOW_S = 2, 4, 10
SPEC: dict[str, Any] = {
    "min": 1, "max": 6,
    "metrics": [{"type": "resource", "name": "cpu", "target_utilization": TARGET}],
    "behavior": {
        "scale_up": {"stabilization_window_s": 0,
                     "policies": [{"type": "instances", "value": UP_STEP, "period_s": UP_PERIOD_S}]},
        "scale_down": {"stabilization_window_s": DOWN_WINDOW_S,
                       "policies": [{"type": "percent", "value": 100, "period_s": 2}]},
    },
}
#: The load of each phase (a fraction of every member's vCPUs) and when the phase ends.
PHASES: list[tuple[float, str, Callable[[dict[str, Any]], bool]]] = [
    (0.3, "30% load on every member: ceil(2 x 30 / 50) = 2, the group stays at 2",
     lambda g: _settled(g, 2) and _cpu(g) == 30),
    (0.9, f"the load rises to 90%: the group grows to its max, {UP_STEP} members per {UP_PERIOD_S} s at most",
     lambda g: _settled(g, 6)),
    (0.1, f"the load falls to 10%: after a {DOWN_WINDOW_S} s stabilization window the group shrinks",
     lambda g: _settled(g, 2) or _settled(g, 1)),
]
#: The controller's settings the demo shortens, and the agents' report interval.
OVERRIDES = {
    ("scaling", "sync_period"): 2.0,
    ("scaling", "cpu_initialization_period"): 0.0,
    ("scaling", "initial_readiness_delay"): 0.0,
    ("scaling", "metric_max_age"): 10.0,
    ("scaling", "cast_grace"): 5.0,
    ("compute_agent", "report_interval"): 1,
    ("scheduler", "periodic_interval"): 1,
}
PHASE_TIMEOUT_S = 60.0


def apply_overrides(conf: Any) -> None:
    for (group, name), value in OVERRIDES.items():
        conf.set_override(name, value, group=group)


def _members(group: dict[str, Any], state: str | None = None) -> list[dict[str, Any]]:
    return [m for m in group.get("members", []) if state is None or m["state"] == state]


def _settled(group: dict[str, Any], count: int) -> bool:
    return group["desired"] == count and len(_members(group, states.ACTIVE)) == count == len(_members(group))


def _cpu(group: dict[str, Any]) -> int | None:
    for metric in (group.get("status") or {}).get("metrics", []):
        if metric["name"] == "cpu":
            return metric.get("current")
    return None


def _line(group: dict[str, Any]) -> str:
    counts = ", ".join(f"{n} {state}" for state, n in sorted(group.get("member_counts", {}).items()))
    cpu = _cpu(group)
    return (f"{group['desired']} desired, {len(_members(group))} members ({counts or 'none'}); cpu "
            f"{'-' if cpu is None else f'{cpu}%'} of requests")


class Timeline:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.started = time.monotonic()
        self.last: str | None = None
        self.desired: list[int] = []

    def say(self, text: str) -> None:
        print(f"{time.monotonic() - self.started:6.1f}s  {text}", file=self.out)

    def watch(self, group: dict[str, Any]) -> None:
        line = _line(group)
        if line != self.last:
            self.say(f"  {GROUP}: {line}")
            self.last = line
        if not self.desired or self.desired[-1] != group["desired"]:
            self.desired.append(group["desired"])


def set_load(compute: ComputeClient, hosts: list[str], cpu: float) -> None:
    for host in hosts:
        compute.set_fake_load({}, host, cpu)


def run_scaling_demo(client: Any, compute: ComputeClient, hosts: list[str], out: TextIO) -> int:
    """Create the group, walk it through the phases printing a timeline, delete it."""
    wait_until(lambda: set(hosts) <= {h["host"] for h in client.list_hosts({}) if h["state"] == "up"},
               PHASE_TIMEOUT_S, "the agents to report")
    print(f"Scaling group {GROUP}: {SPEC['min']} to {SPEC['max']} members of {FLAVOR} (1 vCPU), cpu target "
          f"{TARGET}% of requests; up at most {UP_STEP} members per {UP_PERIOD_S} s, down after a "
          f"{DOWN_WINDOW_S} s window. The demo syncs every 2 s (15 s in production).\n", file=out)
    timeline = Timeline(out)
    set_load(compute, hosts, PHASES[0][0])
    client.admin_call({}, "create_scaling_group", name=GROUP, spec=SPEC, template={"flavor_name": FLAVOR},
                      desired=2)
    timeline.say(f"created {GROUP}: 2 members desired, none yet (the first sync makes them)")
    reached = []
    try:
        for number, (load, text, done) in enumerate(PHASES):
            if number:
                set_load(compute, hosts, load)
            timeline.say(text)
            deadline = time.monotonic() + PHASE_TIMEOUT_S
            while True:
                group = client.admin_call({}, "show_scaling_group", name_or_uuid=GROUP)
                timeline.watch(group)
                if done(group):
                    reached.append(group["desired"])
                    break
                if time.monotonic() > deadline:
                    timeline.say(f"  not reached within {PHASE_TIMEOUT_S:g} s")
                    return 1
                time.sleep(0.5)
        events = group.get("status", {}).get("events", [])
        for event in events:
            timeline.say(f"  event: {event['reason']}")
    finally:
        client.admin_call({}, "delete_scaling_group", name_or_uuid=GROUP)
        wait_until(lambda: GROUP not in {g["name"] for g in client.admin_call({}, "list_scaling_groups")},
                   PHASE_TIMEOUT_S, f"the scaling group {GROUP} to be deleted")
        for host in hosts:
            compute.clear_fake_load({}, host)
    timeline.say(f"deleted {GROUP} and its members")
    print(f"\nThe group went {' -> '.join(str(n) for n in timeline.desired)} members.", file=out)
    return 0 if reached[1] == SPEC["max"] and reached[2] < reached[1] else 1
