"""Rebalance goals as plugins: the schema check every reader shares, the registry, and a goal of
another distribution (tests/plugin_fixture's Ease: one module and one entry point) offered by
the scheduler, ``berth rebalance plan`` and ``berth simulate --rebalance`` alike."""

import json
from importlib.metadata import EntryPoint

import pytest

from scheduler.moves import goals as rebalance_goals
from scheduler.moves.goals import OptionError, check
from scheduler.moves.goals.make_room import METHODS, MakeRoom
from scheduler.moves.rebalance import planner
from scheduler.policy import plugins
from tests.unit.policy.test_plugin_api import example_plugin, run  # noqa: F401 (a fixture)


def test_berths_goals_are_found_in_their_package_and_declared_as_entry_points():
    assert list(rebalance_goals.goals()) == ["balance", "consolidate", "make_room"]
    declared = {ep.name: ep.value for ep in rebalance_goals.entry_points(group=rebalance_goals.GROUP)}
    assert declared == {name: f"{cls.__module__}:{cls.__qualname__}"
                        for name, cls in rebalance_goals.goals().items()}
    assert METHODS == (planner.AUTO, planner.GREEDY, planner.EXACT)
    assert MakeRoom.argument().name == "flavor" and rebalance_goals.owners("max_migrations") == [
        "balance", "consolidate"]


@pytest.mark.parametrize(("goal", "options", "checked"), [
    ("balance", {}, {"time_limit": 1.0, "max_migrations": 10, "target_skew": 1.15}),
    ("balance", {"target_skew": 2, "time_limit": 3}, {"time_limit": 3.0, "max_migrations": 10,
                                                        "target_skew": 2.0}),
    ("consolidate", {"headroom": 0, "max_migrations": 1000}, {"time_limit": 1.0, "max_migrations": 1000,
                                                              "headroom": 0.0}),
])
def test_the_check_fills_every_option_of_the_schema_in_its_order(goal, options, checked):
    result = check(goal, options)
    assert result == checked and list(result) == list(checked)


@pytest.mark.parametrize(("goal", "options", "message"), [
    ("balance", {"max_migrations": True}, "max_migrations must be a whole number from 1 to 1000, got 'True'"),
    ("balance", {"target_skew": float("inf")}, "target_skew is the busiest host's utilisation"),
    ("balance", {"target_skew": float("nan")}, "target_skew is the busiest host's utilisation"),
    ("consolidate", {"headroom": 1.0}, "headroom is the share of each limit a destination keeps free"),
    ("consolidate", {"target_skew": 1.2}, "unknown option(s) of consolidate: target_skew"),
    ("make_room", {"flavor": None}, "flavor.memory_mb: must be an integer, got None"),
    ("make_room", {"flavor": {"memory_mb": 1, "vcpus": 1}, "zone": " "}, "zone must be a zone's name"),
    ("make_room", {"time_limit": 601}, "time_limit must be a number of seconds in (0, 600], got '601'"),
])
def test_the_check_refuses_what_the_schema_does_not_allow(goal, options, message):
    with pytest.raises(OptionError) as caught:
        check(goal, options)
    assert str(caught.value).startswith(message)


def test_a_goal_of_another_distribution_that_takes_a_name_of_berths_is_refused(monkeypatch):
    eps = [EntryPoint("mine", "scheduler.moves.goals.balance:Balance", rebalance_goals.GROUP),
           EntryPoint("broken", "a_module_nobody_installed:Goal", rebalance_goals.GROUP)]
    monkeypatch.setattr(rebalance_goals, "entry_points", lambda group: eps)
    rebalance_goals.goals.cache_clear()
    try:
        assert list(rebalance_goals.goals()) == ["balance", "consolidate", "make_room"]  # the same class
        eps[0] = EntryPoint("mine", "tests.unit.moves.test_goal_plugins:Balance",
                            rebalance_goals.GROUP)
        rebalance_goals.goals.cache_clear()
        with pytest.raises(plugins.PluginError, match="two rebalance goals are named balance: "
                                                      "scheduler.moves.goals.balance.Balance"):
            rebalance_goals.goals()
    finally:
        rebalance_goals.goals.cache_clear()


class Balance(rebalance_goals.Goal):
    name = "balance"
    summary = "a goal that shadows Berth's"


EASE = """
    import io, json, sys
    from scheduler.cmd.arguments import CommandError
    from scheduler.exception import InvalidRequest
    from scheduler.moves import rebalance_api
    from scheduler.moves import goals as rebalance_goals
    from scheduler.simulation import rebalance
    from tests.unit.cli_scheduler import parse, write_conf
    import pathlib, tempfile

    found = {"goals": list(rebalance_goals.goals())}
    found["checked"] = rebalance_api._options("ease", {"moves": 2})
    try:
        rebalance_api._options("ease", {"moves": 6})
    except InvalidRequest as exc:
        found["refused"] = str(exc)

    class Scheduler:
        def admin_call(self, ctxt, method, **kwargs):
            found["sent"] = kwargs
            return {"id": 1, "goal": kwargs["goal"], "state": "done", "options": kwargs["options"],
                    "summary": {"method": "greedy", "figures": []}, "steps": []}

    conf = write_conf(pathlib.Path(tempfile.mkdtemp()))
    args = parse(conf, "rebalance", "plan", "--ease", "--moves", "3")
    args.func(Scheduler(), args, io.StringIO())
    try:
        args = parse(conf, "rebalance", "plan", "--balance", "--moves", "3")
        args.func(Scheduler(), args, io.StringIO())
    except CommandError as exc:
        found["cli refused"] = str(exc)
    spec = rebalance.parse("every=1h,goal=ease,moves=2")
    found["spec"] = [spec.goal, dict(spec.options), spec.label]
    try:
        rebalance.parse("every=1h,goal=balance,moves=2")
    except Exception as exc:
        found["sim refused"] = str(exc)
    print(json.dumps(found))
"""


def test_a_goal_installed_by_another_distribution_is_offered_everywhere(example_plugin):  # noqa: F811
    found = json.loads(run(example_plugin, EASE))
    assert found["goals"] == ["balance", "consolidate", "make_room", "ease"]
    assert found["checked"] == {"time_limit": 1.0, "moves": 2}
    assert found["refused"] == "plan_rebalance: moves must be a whole number from 1 to 5, got '6'"
    assert found["sent"] == {"goal": "ease", "options": {"time_limit": 1.0, "moves": 3}}
    assert found["cli refused"] == "--moves goes with --ease, not --balance"
    assert found["spec"] == ["ease", {"time_limit": 1.0, "moves": 2}, "ease every 1h"]
    assert found["sim refused"] == "--rebalance: moves= is an option of the ease goal; goal is balance"
