"""What a job does next, decided from its rows alone: no database, no messages, no clock.

:func:`next_actions` takes a job as its rows say (:class:`JobView`), its steps
(:class:`StepView`), the migrations of its running steps (:class:`MoveView`) and the
database's time, and returns what to write and start, in order: the steps whose migration
ended (:class:`EndStep`), a stop (:class:`Stop`: a rebalance step failed, the drain's
timeout passed, the plan was stopped), the steps to start (:class:`StartStep`, at most
``max_parallel`` under way), and the job's end (:class:`Finish`). scheduler.moves.jobs.runner
carries them out, each a compare-and-set, and asks again after a step start that failed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime

from scheduler.db import jobs as rows
from scheduler.db import moves

#: The statuses of a migration that moved its instance, and of one that did not.
MOVED = (moves.COMPLETED, moves.CONFIRMED)
NOT_MOVED = (moves.ERROR, moves.REVERTED)


@dataclasses.dataclass(frozen=True)
class JobView:
    state: str  # rows.RUNNING or rows.STOPPING (an ended job is not carried on)
    max_parallel: int
    stop_on_failure: bool = False  # a rebalance plan stops at its first failed step; a drain goes on
    deadline: datetime | None = None  # past it, a drain starts no new step and stops
    timeout: int | None = None  # the seconds asked, for the reason
    stop_asked: str | None = None  # stopped from elsewhere (its plan stopped): why


@dataclasses.dataclass(frozen=True)
class StepView:
    position: int
    status: str  # pending, running, done, failed
    migration_id: int | None = None
    reason: str | None = None  # why it failed


@dataclasses.dataclass(frozen=True)
class MoveView:
    status: str
    dest_host: str | None = None
    reason: str | None = None


@dataclasses.dataclass(frozen=True)
class EndStep:
    """The step's migration ended: write its outcome (done or failed) and why."""

    position: int
    status: str
    dest_host: str | None = None
    reason: str | None = None


@dataclasses.dataclass(frozen=True)
class Stop:
    """Start no new step; those under way end on their own."""

    reason: str


@dataclasses.dataclass(frozen=True)
class StartStep:
    position: int


@dataclasses.dataclass(frozen=True)
class Finish:
    """Nothing under way and nothing more to start: the job ends, done or stopped."""

    state: str
    reason: str | None = None


Action = EndStep | Stop | StartStep | Finish


def _ended(step: StepView, moves_by_id: Mapping[int, MoveView]) -> EndStep | None:
    if step.status != rows.STEP_RUNNING or step.migration_id is None:
        return None
    move = moves_by_id.get(step.migration_id)
    if move is None:
        return None
    if move.status in MOVED:
        return EndStep(step.position, rows.STEP_DONE, dest_host=move.dest_host)
    if move.status in NOT_MOVED:
        why = move.reason or f"migration {step.migration_id} ended {move.status}"
        return EndStep(step.position, rows.FAILED, dest_host=move.dest_host, reason=why)
    return None


def _failure(step: StepView) -> str:
    """A failed step, as a plan's reason says it: refused when it never started a migration."""
    return f"step {step.position} {'failed' if step.migration_id is not None else 'refused'}: {step.reason}"


def next_actions(job: JobView, steps: Sequence[StepView], moves_by_id: Mapping[int, MoveView],
                 now: datetime) -> list[Action]:
    """What to do next with ``job``, in order; nothing when there is nothing to do yet."""
    actions: list[Action] = []
    statuses = {}
    for step in steps:
        ended = _ended(step, moves_by_id)
        if ended is not None:
            actions.append(ended)
            step = dataclasses.replace(step, status=ended.status, reason=ended.reason)
        statuses[step.position] = step
    pending = [s for s in steps if statuses[s.position].status == rows.PENDING]
    running = [s for s in statuses.values() if s.status == rows.STEP_RUNNING]
    state, reason = job.state, None
    if state == rows.RUNNING:
        failed = [s for s in statuses.values() if s.status == rows.FAILED]
        if job.stop_asked is not None:
            reason = job.stop_asked
        elif job.stop_on_failure and failed:
            reason = _failure(min(failed, key=lambda s: s.position))
        elif job.deadline is not None and now >= job.deadline and (pending or running):
            reason = f"timed out after {job.timeout} s"
        if reason is not None:
            actions.append(Stop(reason))
            state = rows.STOPPING
    if state == rows.RUNNING:
        room = max(0, job.max_parallel - len(running))
        actions += [StartStep(s.position) for s in pending[:room]]
        if not pending and not running:
            actions.append(Finish(rows.DONE))
    elif not running:
        actions.append(Finish(rows.STOPPED, reason))
    return actions
