"""[jobs]: how the schedulers carry on the jobs (scheduler.moves.jobs.runner reads them, through
the service that builds it). A module of its own, light, so that the options are registered
without importing the runner and what it moves instances with."""

from __future__ import annotations

from oslo_config import cfg

group = cfg.OptGroup(
    "jobs", title="Jobs",
    help="Drains (berth host drain) and rebalance plans (berth rebalance apply) that the schedulers "
    "carry on until they end, whatever becomes of the command that started them. Each job is "
    "carried on by one scheduler at a time, which holds it by lease.")

opts: list[cfg.Opt] = [
    cfg.FloatOpt(
        "interval",
        default=1.0,
        min=0.1,
        max=60.0,
        help="Seconds between two looks of a scheduler at the jobs it carries on: how soon a move "
        "that ended is recorded and the next one starts.",
    ),
    cfg.FloatOpt(
        "lease_time",
        default=15.0,
        min=1.0,
        help="Seconds a scheduler holds the jobs it carries on, renewed at each look: once a "
        "scheduler stops renewing (it was killed, or lost the database), another takes its jobs "
        "over after this long. A scheduler that stops cleanly gives its jobs up at once.",
    ),
]


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    return [(group, opts)]
