"""What a job does next, from its rows alone (scheduler.moves.jobs.policy)."""

from datetime import datetime, timedelta

from scheduler.moves.jobs.policy import (
    EndStep,
    Finish,
    JobView,
    MoveView,
    StartStep,
    StepView,
    Stop,
    next_actions,
)

NOW = datetime(2026, 12, 7, 10, 0, 0)


def steps(*statuses):
    """Steps 1.. in ``statuses``; a running one's migration is 100 + its position."""
    return [StepView(n, status, 100 + n if status in ("running", "done") else None)
            for n, status in enumerate(statuses, 1)]


def test_steps_start_in_order_never_more_than_max_parallel_under_way():
    job = JobView("running", max_parallel=2)
    assert next_actions(job, steps("pending", "pending", "pending"), {}, NOW) == [StartStep(1), StartStep(2)]
    assert next_actions(job, steps("running", "pending", "pending"), {}, NOW) == [StartStep(2)]
    assert next_actions(job, steps("running", "running", "pending"), {}, NOW) == []


def test_a_move_that_ended_is_recorded_and_makes_room_for_the_next_step():
    job = JobView("running", max_parallel=1)
    moves = {101: MoveView("completed", "h3")}
    assert next_actions(job, steps("running", "pending"), moves, NOW) == [
        EndStep(1, "done", dest_host="h3"), StartStep(2)]
    failed = {101: MoveView("error", "h3", "disk full")}
    assert next_actions(job, steps("running", "pending"), failed, NOW) == [
        EndStep(1, "failed", dest_host="h3", reason="disk full"), StartStep(2)]
    under_way = {101: MoveView("migrating", "h3")}
    assert next_actions(job, steps("running", "pending"), under_way, NOW) == []


def test_a_drain_goes_on_after_a_failure_and_is_done_when_every_step_ended():
    job = JobView("running", max_parallel=2)
    assert next_actions(job, steps("failed", "pending"), {}, NOW) == [StartStep(2)]
    assert next_actions(job, steps("failed", "done"), {}, NOW) == [Finish("done")]
    assert next_actions(job, [], {}, NOW) == [Finish("done")]


def test_a_plan_stops_at_its_first_failed_step_and_ends_once_nothing_is_under_way():
    plan = JobView("running", max_parallel=2, stop_on_failure=True)
    failing = {101: MoveView("error", "h2", "disk on fire")}
    assert next_actions(plan, steps("running", "running", "pending"), failing, NOW) == [
        EndStep(1, "failed", dest_host="h2", reason="disk on fire"), Stop("step 1 failed: disk on fire")]
    refused = [StepView(1, "failed", None, "host h2 changed"), StepView(2, "pending")]
    assert next_actions(plan, refused, {}, NOW) == [Stop("step 1 refused: host h2 changed"),
                                                    Finish("stopped", "step 1 refused: host h2 changed")]


def test_a_stopped_job_starts_nothing_and_ends_stopped_once_its_moves_have():
    job = JobView("stopping", max_parallel=2)
    assert next_actions(job, steps("running", "pending"), {}, NOW) == []
    assert next_actions(job, steps("running", "pending"), {101: MoveView("completed", "h3")}, NOW) == [
        EndStep(1, "done", dest_host="h3"), Finish("stopped")]
    asked = JobView("running", max_parallel=2, stop_asked="stopped by berth rebalance stop")
    assert next_actions(asked, steps("pending"), {}, NOW) == [
        Stop("stopped by berth rebalance stop"), Finish("stopped", "stopped by berth rebalance stop")]


def test_past_its_deadline_a_job_with_work_left_stops_saying_so():
    job = JobView("running", max_parallel=2, deadline=NOW, timeout=30)
    assert next_actions(job, steps("running", "pending"), {}, NOW) == [Stop("timed out after 30 s")]
    early = JobView("running", max_parallel=2, deadline=NOW + timedelta(seconds=1), timeout=30)
    assert next_actions(early, steps("running", "pending"), {}, NOW) == [StartStep(2)]
    assert next_actions(job, steps("done"), {}, NOW) == [Finish("done")]
