"""A scaling group's spec and the what-if input: parsed from JSON, checked, defaulted.

Every value is checked and every unknown key refused; a mistake raises
:class:`SpecError` naming where it is (``spec.metrics[1].target_average``).
The defaults are Kubernetes' (autoscaling/v2 defaulting and the controller's flags).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from scheduler import states

RESOURCE = "resource"
INSTANCE = "instance"
EXTERNAL = "external"
METRIC_TYPES = (RESOURCE, INSTANCE, EXTERNAL)
RESOURCES = ("cpu", "memory")
CPU = "cpu"

INSTANCES = "instances"
PERCENT = "percent"
POLICY_TYPES = (INSTANCES, PERCENT)
SELECT_MAX = "max"
SELECT_MIN = "min"
SELECT_DISABLED = "disabled"
SELECT_POLICIES = (SELECT_MAX, SELECT_MIN, SELECT_DISABLED)

#: kube-controller-manager --horizontal-pod-autoscaler-tolerance.
DEFAULT_TOLERANCE = Decimal("0.1")
#: --horizontal-pod-autoscaler-cpu-initialization-period.
DEFAULT_CPU_INITIALIZATION_PERIOD_S = 300
#: --horizontal-pod-autoscaler-initial-readiness-delay.
DEFAULT_INITIAL_READINESS_DELAY_S = 30
#: The window of one cpu sample (Kubernetes' metrics API reports it with each sample).
DEFAULT_SAMPLE_WINDOW_S = 60
#: A resource metric without any metrics listed: cpu at 80 % (autoscaling/v2 defaulting).
DEFAULT_CPU_UTILIZATION = 80
#: Kubernetes' validation bounds.
MAX_STABILIZATION_WINDOW_S = 3600
MAX_POLICY_PERIOD_S = 1800
#: A group's min and max: Kubernetes' int32 replica counts (its other counts are int32 too).
MAX_REPLICAS = 2**31 - 1

#: Member states: waiting for a host or being built (Kubernetes: Pending).
PENDING_STATES = (states.SCHEDULING, states.SCHEDULED, states.BUILDING)
#: Member states left out of every calculation (Kubernetes: Failed, or being deleted).
DROPPED_STATES = (states.ERROR, states.DELETING)
#: Member states of a member on its host that is not running, or whose power changes (SHUTOFF, and a
#: stop, start or reboot under way): counted, not ready (Kubernetes: a pod not Ready), their samples
#: set aside, as the unready members' are.
POWER_STATES = states.POWER
MEMBER_STATES = PENDING_STATES + (states.ACTIVE,) + DROPPED_STATES + POWER_STATES


class SpecError(ValueError):
    """A bad spec or what-if input: ``str()`` is one line, ``path: what is wrong``."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


@dataclass(frozen=True)
class ScalingPolicy:
    type: str  # INSTANCES or PERCENT
    value: int
    period_s: int


@dataclass(frozen=True)
class ScalingRules:
    """One direction's behavior (Kubernetes' HPAScalingRules)."""

    stabilization_window_s: int
    select_policy: str
    policies: tuple[ScalingPolicy, ...]
    tolerance: Decimal | None = None  # None: the group's tolerance

    @property
    def longest_period_s(self) -> int:
        return max((p.period_s for p in self.policies), default=0)


DEFAULT_SCALE_UP = ScalingRules(0, SELECT_MAX,
                                (ScalingPolicy(INSTANCES, 4, 15), ScalingPolicy(PERCENT, 100, 15)))
DEFAULT_SCALE_DOWN = ScalingRules(300, SELECT_MAX, (ScalingPolicy(PERCENT, 100, 15),))


@dataclass(frozen=True)
class Behavior:
    scale_up: ScalingRules = DEFAULT_SCALE_UP
    scale_down: ScalingRules = DEFAULT_SCALE_DOWN


@dataclass(frozen=True)
class MetricSpec:
    """One metric and its target; exactly one target is set.

    ``target_utilization`` (percent of the request, resource metrics), ``target_average``
    (per member: resource, instance or external metrics), ``target_value`` (external)."""

    type: str
    name: str
    target_utilization: int | None = None
    target_average: Decimal | None = None
    target_value: Decimal | None = None


@dataclass(frozen=True)
class GroupSpec:
    min: int
    max: int
    metrics: tuple[MetricSpec, ...]
    tolerance: Decimal = DEFAULT_TOLERANCE
    behavior: Behavior = Behavior()


@dataclass(frozen=True)
class Member:
    """One member of a group as the calculation sees it.

    ``requests``: the flavor's vcpus (``cpu``) and RAM in MB (``memory``).
    ``usage``: the member's last sample of each metric; a metric missing is left out.
    ``started_s_ago``: seconds since it started (None: long ago, past every readiness period).
    ``ready_since_s_ago``: seconds since ``ready`` last changed (None: since it started).
    ``sample_s_ago``/``sample_window_s``: age and window of its cpu sample."""

    state: str
    ready: bool = True
    requests: Mapping[str, Decimal] = field(default_factory=dict)
    usage: Mapping[str, Decimal] = field(default_factory=dict)
    started_s_ago: float | None = None
    ready_since_s_ago: float | None = None
    sample_s_ago: float = 0.0
    sample_window_s: float = DEFAULT_SAMPLE_WINDOW_S
    name: str | None = None


@dataclass(frozen=True)
class SettledMembers:
    """``count`` members, every one ACTIVE, ready, past its readiness periods and with a
    sample of each metric in ``totals``: the samples' sums (``totals``) and the requests'
    sums (``requested``), in milli-units, by metric and by resource."""

    count: int
    totals: Mapping[str, int]
    requested: Mapping[str, int]


@dataclass(frozen=True)
class Readiness:
    """The controller-wide cpu readiness periods (kube-controller-manager flags)."""

    cpu_initialization_period_s: float = DEFAULT_CPU_INITIALIZATION_PERIOD_S
    initial_readiness_delay_s: float = DEFAULT_INITIAL_READINESS_DELAY_S


@dataclass(frozen=True)
class Recommendation:
    age_s: float
    replicas: int


@dataclass(frozen=True)
class ScaleEvent:
    age_s: float
    change: int  # > 0 up, < 0 down


@dataclass(frozen=True)
class WhatIf:
    spec: GroupSpec
    current: int
    members: tuple[Member, ...] = ()
    external: Mapping[str, Decimal] = field(default_factory=dict)
    #: None: the group was never synced (the first sync records ``current`` first).
    recommendations: tuple[Recommendation, ...] | None = None
    scale_events: tuple[ScaleEvent, ...] = ()
    readiness: Readiness = Readiness()


# -- checking values --------------------------------------------------------------------------------


def _shown(value: Any) -> str:
    if isinstance(value, Decimal):
        text = str(value)
        return text if len(text) <= 60 else text[:57] + "..."
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_number(value: Any) -> bool:
    # A float is how JSON decoded without parse_float=Decimal (the database's, the RPC's) holds 0.1.
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int | Decimal) and not isinstance(value, bool)


def _object(value: Any, path: str, keys: tuple[str, ...], required: tuple[str, ...] = ()) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SpecError(path, f"must be an object, got {_shown(value)}")
    for key in value:
        if key not in keys:
            raise SpecError(_join(path, key), f"unknown key (known: {', '.join(keys)})")
    for key in required:
        if key not in value:
            raise SpecError(_join(path, key), "is required")
    return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise SpecError(path, f"must be a list, got {_shown(value)}")
    return value


def _whole(value: Any, path: str, low: int = 0, high: int | None = None, what: str = "") -> int:
    ok = _is_number(value) and value == int(value) and value >= low and (high is None or value <= high)
    if not ok:
        bound = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise SpecError(path, f"must be a whole number {what or bound}, got {_shown(value)}")
    return int(value)


def _number(value: Any, path: str, above_zero: bool = False) -> Decimal:
    if not _is_number(value) or value < 0 or (above_zero and value == 0):
        raise SpecError(path, f"must be a number {'above 0' if above_zero else '>= 0'}, got {_shown(value)}")
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def _seconds(value: Any, path: str) -> float:
    return float(_number(value, path))


def _text(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise SpecError(path, f"must be a non-empty string, got {_shown(value)}")
    return value


def _choice(value: Any, path: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise SpecError(path, f"must be one of {', '.join(choices)}, got {_shown(value)}")
    return str(value)


def _boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(path, f"must be true or false, got {_shown(value)}")
    return value


# -- the group spec ---------------------------------------------------------------------------------

_METRIC_KEYS = ("type", "name", "target_utilization", "target_average", "target_value")
_TARGETS = {
    RESOURCE: ("target_utilization", "target_average"),
    INSTANCE: ("target_average",),
    EXTERNAL: ("target_value", "target_average"),
}


def parse_metric(value: Any, path: str) -> MetricSpec:
    data = _object(value, path, _METRIC_KEYS, ("type", "name"))
    kind = _choice(data["type"], _join(path, "type"), METRIC_TYPES)
    name = _text(data["name"], _join(path, "name"))
    if kind == RESOURCE:
        _choice(name, _join(path, "name"), RESOURCES)
    allowed = _TARGETS[kind]
    given = [key for key in ("target_utilization", "target_average", "target_value") if key in data]
    for key in given:
        if key not in allowed:
            raise SpecError(_join(path, key),
                            f"not a target of a {kind} metric (give {' or '.join(allowed)})")
    if len(given) != 1:
        raise SpecError(path, f"give exactly one target: {' or '.join(allowed)}")
    key = given[0]
    if key == "target_utilization":
        return MetricSpec(kind, name, target_utilization=_whole(data[key], _join(path, key), 1, MAX_REPLICAS,
                                                                what=f"from 1 to {MAX_REPLICAS} (percent)"))
    target = _number(data[key], _join(path, key), above_zero=True)
    if key == "target_average":
        return MetricSpec(kind, name, target_average=target)
    return MetricSpec(kind, name, target_value=target)


def _tolerance(value: Any, path: str) -> Decimal:
    return _number(value, path)


def parse_policy(value: Any, path: str) -> ScalingPolicy:
    data = _object(value, path, ("type", "value", "period_s"), ("type", "value", "period_s"))
    return ScalingPolicy(
        _choice(data["type"], _join(path, "type"), POLICY_TYPES),
        _whole(data["value"], _join(path, "value"), 1, MAX_REPLICAS),
        _whole(data["period_s"], _join(path, "period_s"), 1, MAX_POLICY_PERIOD_S),
    )


def parse_rules(value: Any, path: str, default: ScalingRules) -> ScalingRules:
    data = _object(value, path, ("stabilization_window_s", "select_policy", "policies", "tolerance"))
    window = default.stabilization_window_s
    if "stabilization_window_s" in data:
        window = _whole(data["stabilization_window_s"], _join(path, "stabilization_window_s"), 0,
                        MAX_STABILIZATION_WINDOW_S)
    select = default.select_policy
    if "select_policy" in data:
        select = _choice(data["select_policy"], _join(path, "select_policy"), SELECT_POLICIES)
    policies = default.policies
    if "policies" in data:
        items = _list(data["policies"], _join(path, "policies"))
        if not items:
            raise SpecError(_join(path, "policies"), "must list at least one policy (or be left out)")
        policies = tuple(parse_policy(item, f"{path}.policies[{i}]") for i, item in enumerate(items))
    tolerance = _tolerance(data["tolerance"], _join(path, "tolerance")) if "tolerance" in data else None
    return ScalingRules(window, select, policies, tolerance)


def parse_behavior(value: Any, path: str) -> Behavior:
    data = _object(value, path, ("scale_up", "scale_down"))
    up = parse_rules(data["scale_up"], _join(path, "scale_up"), DEFAULT_SCALE_UP) \
        if "scale_up" in data else DEFAULT_SCALE_UP
    down = parse_rules(data["scale_down"], _join(path, "scale_down"), DEFAULT_SCALE_DOWN) \
        if "scale_down" in data else DEFAULT_SCALE_DOWN
    return Behavior(up, down)


def parse_spec(value: Any, path: str = "spec") -> GroupSpec:
    """A group spec from its JSON form (see the user guide's "Scaling groups")."""
    data = _object(value, path, ("min", "max", "metrics", "tolerance", "behavior"), ("max",))
    low = _whole(data["min"], _join(path, "min"), 0, MAX_REPLICAS) if "min" in data else 1
    high = _whole(data["max"], _join(path, "max"), 1, MAX_REPLICAS)
    if low > high:
        raise SpecError(_join(path, "min"), f"must not be above max ({high}), got {low}")
    if "metrics" in data:
        items = _list(data["metrics"], _join(path, "metrics"))
        if not items:
            raise SpecError(_join(path, "metrics"), "must list at least one metric "
                            f"(or be left out: cpu at {DEFAULT_CPU_UTILIZATION} %)")
        metrics = tuple(parse_metric(item, f"{path}.metrics[{i}]") for i, item in enumerate(items))
    else:
        metrics = (MetricSpec(RESOURCE, CPU, target_utilization=DEFAULT_CPU_UTILIZATION),)
    tolerance = DEFAULT_TOLERANCE
    if "tolerance" in data:
        tolerance = _tolerance(data["tolerance"], _join(path, "tolerance"))
    behavior = parse_behavior(data["behavior"], _join(path, "behavior")) if "behavior" in data else Behavior()
    return GroupSpec(low, high, metrics, tolerance, behavior)


# -- the what-if input ------------------------------------------------------------------------------

_MEMBER_KEYS = ("state", "ready", "requests", "usage", "started_s_ago", "ready_since_s_ago",
                "sample_s_ago", "sample_window_s", "name")


def _measures(value: Any, path: str, keys: tuple[str, ...] | None = None) -> dict[str, Decimal]:
    if not isinstance(value, dict):
        raise SpecError(path, f"must be an object, got {_shown(value)}")
    found = {}
    for key, number in value.items():
        if keys is not None and key not in keys:
            raise SpecError(_join(path, key), f"unknown key (known: {', '.join(keys)})")
        found[key] = _number(number, _join(path, key))
    return found


def parse_member(value: Any, path: str) -> Member:
    data = _object(value, path, _MEMBER_KEYS, ("state",))
    started = None
    if "started_s_ago" in data:
        started = _seconds(data["started_s_ago"], _join(path, "started_s_ago"))
    since = None
    if "ready_since_s_ago" in data:
        since = _seconds(data["ready_since_s_ago"], _join(path, "ready_since_s_ago"))
        if started is not None and since > started:
            raise SpecError(_join(path, "ready_since_s_ago"),
                            f"must not be more than started_s_ago ({started:g}), got {since:g}")
    return Member(
        state=_choice(data["state"], _join(path, "state"), MEMBER_STATES),
        ready=_boolean(data["ready"], _join(path, "ready")) if "ready" in data else True,
        requests=_measures(data.get("requests", {}), _join(path, "requests"), RESOURCES),
        usage=_measures(data.get("usage", {}), _join(path, "usage")),
        started_s_ago=started,
        ready_since_s_ago=since,
        sample_s_ago=_seconds(data.get("sample_s_ago", 0), _join(path, "sample_s_ago")),
        sample_window_s=_seconds(data.get("sample_window_s", DEFAULT_SAMPLE_WINDOW_S),
                                 _join(path, "sample_window_s")),
        name=_text(data["name"], _join(path, "name")) if "name" in data else None,
    )


def _history(value: Any, path: str, parse: Callable[[dict[str, Any], str], Any]) -> tuple[Any, ...]:
    items = _list(value, path)
    return tuple(parse(item, f"{path}[{i}]") for i, item in enumerate(items))


def _recommendation(value: Any, path: str) -> Recommendation:
    data = _object(value, path, ("age_s", "replicas"), ("age_s", "replicas"))
    return Recommendation(_seconds(data["age_s"], _join(path, "age_s")),
                          _whole(data["replicas"], _join(path, "replicas"), 0, MAX_REPLICAS))


def _scale_event(value: Any, path: str) -> ScaleEvent:
    data = _object(value, path, ("age_s", "change"), ("age_s", "change"))
    change = data["change"]
    if not _is_number(change) or change != int(change) or change == 0:
        raise SpecError(_join(path, "change"),
                        f"must be a whole number other than 0 (> 0 up, < 0 down), got {_shown(change)}")
    return ScaleEvent(_seconds(data["age_s"], _join(path, "age_s")), int(change))


_WHAT_IF_KEYS = ("spec", "current", "members", "external", "recommendations", "scale_events",
                 "cpu_initialization_period_s", "initial_readiness_delay_s")


def parse_what_if(value: Any) -> WhatIf:
    """The what-if input (one JSON value, already decoded) as a :class:`WhatIf`."""
    data = _object(value, "", _WHAT_IF_KEYS, ("spec", "current"))
    spec = parse_spec(data["spec"])
    readiness = Readiness(
        _seconds(data.get("cpu_initialization_period_s", DEFAULT_CPU_INITIALIZATION_PERIOD_S),
                 "cpu_initialization_period_s"),
        _seconds(data.get("initial_readiness_delay_s", DEFAULT_INITIAL_READINESS_DELAY_S),
                 "initial_readiness_delay_s"),
    )
    recommendations = None
    if "recommendations" in data:
        recommendations = _history(data["recommendations"], "recommendations", _recommendation)
    return WhatIf(
        spec=spec,
        current=_whole(data["current"], "current", 0, MAX_REPLICAS),
        members=_history(data.get("members", []), "members", parse_member),
        external=_measures(data.get("external", {}), "external"),
        recommendations=recommendations,
        scale_events=_history(data.get("scale_events", []), "scale_events", _scale_event),
        readiness=readiness,
    )


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise SpecError("", f"key {json.dumps(key)} is given twice in one object")
        found[key] = value
    return found


def _no_constant(name: str) -> Any:
    raise SpecError("", f"{name} is not a number JSON allows")


def loads(text: str) -> Any:
    """Decode JSON keeping decimals exact, refusing NaN/Infinity and keys given twice."""
    try:
        return json.loads(text, parse_float=Decimal, parse_constant=_no_constant,
                          object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise SpecError("", f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
