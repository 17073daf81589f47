"""Ease: a rebalance goal that moves at most --moves instances off the most loaded hosts.

One module and one entry point (berth.rebalance.goals) are all a goal takes: the scheduler,
``berth rebalance plan --ease [--moves N]`` and ``berth simulate --rebalance goal=ease,moves=N``
read it from there.
"""

from scheduler.moves.goals import INT, Goal, Option


class Ease(Goal):
    name = "ease"
    summary = "move at most --moves instances off the most loaded hosts"
    schema = (
        Option("moves", INT, 1, "at most N migrations (default 1)", minimum=1, maximum=5, metavar="N"),
    )

    def plan(self, snapshot, options):
        from scheduler.moves.rebalance import balance  # the planner only when planning

        return balance(snapshot, options["filters"], target_skew=1.0, max_migrations=options["moves"])
