"""What one sync of a scaling group does, as the controller plans it: Kubernetes'
reconcileAutoscaler (the count, :func:`scheduler.scaling.decide.decide`) then the
ReplicaSet's part: ERROR members replaced (with a back-off), members chosen for deletion
(:func:`scheduler.scaling.members.victims`) or to be created so that the counted ones come
to the count decided.

At most ``max_new_members`` are created a sync, replacements first (as a ReplicaSet
creates at most its burst a sync); and while ERROR members wait for their replacement's
back-off, none is created: the fleet refused the last ones (no room, most often), and
more would fail the same way.

Pure: the members (rows, oldest first), what the policy sees of them, the group's history
and its replacement back-off come in, ages and waits in seconds; the controller and the
simulator carry the plan out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from scheduler import states
from scheduler.scaling import decide as policy
from scheduler.scaling import members as group_members
from scheduler.scaling.members import COUNTED_STATES
from scheduler.scaling.replicas import Members
from scheduler.scaling.spec import GroupSpec, Readiness, Recommendation, ScaleEvent


@dataclass(frozen=True)
class PlanSettings:
    max_new_members: int = 100  # members one sync of a group creates at most, replacements included
    replace_backoff_s: float = 10.0  # the first wait before ERROR members are replaced again
    replace_backoff_max_s: float = 300.0  # the wait doubles up to this
    readiness: Readiness = Readiness()


def plan_settings(conf: Any) -> PlanSettings:
    """The settings of a Berth configuration's [scaling] options."""
    scaling = conf.scaling
    return PlanSettings(
        max_new_members=scaling.max_new_members_per_sync,
        replace_backoff_s=scaling.replace_backoff,
        replace_backoff_max_s=max(scaling.replace_backoff, scaling.replace_backoff_max),
        readiness=Readiness(
            cpu_initialization_period_s=scaling.cpu_initialization_period,
            initial_readiness_delay_s=scaling.initial_readiness_delay,
        ),
    )


@dataclass(frozen=True)
class History:
    """A group's recorded history within its horizon, ages in seconds before this sync."""

    recommendations: Sequence[Recommendation] | None  # None: the group was never synced
    scale_events: Sequence[ScaleEvent] = ()


@dataclass(frozen=True)
class Backoff:
    """ERROR members' replacements: how many in a row, and the seconds until the next may be
    made (None, or at most 0: now)."""

    failures: int = 0
    wait_s: float | None = None


@dataclass(frozen=True)
class SyncPlan:
    decision: policy.Decision
    #: The recommendations to record with this sync's time.
    recorded: tuple[int, ...]
    #: The group is paused (its desired count is 0 while its min is not): nothing to do.
    paused: bool = False
    #: ERROR members replaced this sync (they are the first victims).
    replacing: tuple[Mapping[str, Any], ...] = ()
    #: The members to delete, first first.
    victims: tuple[Mapping[str, Any], ...] = ()
    #: How many members to create.
    create: int = 0
    #: Members still to create after this sync ({count, reason}), None: none.
    pending: dict[str, Any] | None = None
    #: The back-off after this sync, None: unchanged.
    backoff: Backoff | None = None


def plan_sync(
    spec: GroupSpec,
    current: int,
    rows: Sequence[Mapping[str, Any]],
    seen: Members,
    external: Mapping[str, Decimal],
    history: History,
    settings: PlanSettings,
    backoff: Backoff = Backoff(),
    template_error: str | None = None,
) -> SyncPlan:
    """One sync of a group whose desired count is ``current``: ``rows`` are its members
    (``uuid``, ``state``, ``host``), oldest first; ``seen`` what the policy reads of the
    counted ones; ``template_error`` why no member can be made, None if one can."""
    decision = policy.decide(
        spec, current, seen, external, history.recommendations, history.scale_events, settings.readiness
    )
    recorded = ([current] if decision.record_initial else []) + (
        [decision.recommendation] if decision.recommendation is not None else []
    )
    if current == 0 and spec.min > 0:
        return SyncPlan(decision, tuple(recorded), paused=True)
    desired = decision.desired
    counted: list[Mapping[str, Any]] = []
    errors: list[Mapping[str, Any]] = []
    all_active = True
    for member in rows:
        state = member["state"]
        if state in COUNTED_STATES:
            counted.append(member)
            if state not in states.RUNNING:
                all_active = False
                if state == states.ERROR:
                    errors.append(member)
    budget = settings.max_new_members
    replacing: list[Mapping[str, Any]] = []
    after: Backoff | None = None
    due = backoff.wait_s is None or backoff.wait_s <= 0
    if errors and template_error is None and due:
        replacing = errors[:budget]
        delay = group_members.replace_delay(
            backoff.failures, settings.replace_backoff_s, settings.replace_backoff_max_s
        )
        after = Backoff(backoff.failures + 1, delay)
    elif all_active:
        after = Backoff()
    kept = [m for m in counted if m not in replacing] if replacing else counted
    victims = list(replacing)
    if len(kept) > desired:
        victims += group_members.victims(kept, len(kept) - desired)
    missing = desired - len(kept)
    create, pending = 0, None
    if missing > 0 and template_error is None:
        held = bool(errors) and not replacing
        create = 0 if held else min(missing, budget)
        if create < missing:
            reason = (
                f"{len(errors)} ERROR member(s) wait for their replacement"
                if held
                else f"at most {budget} new members a sync ([scaling] max_new_members_per_sync)"
            )
            pending = {"count": missing - create, "reason": reason}
    return SyncPlan(
        decision, tuple(recorded), False, tuple(replacing), tuple(victims), create, pending, after
    )
