"""An out-of-tree plugin may still import the wire types from scheduler.policy, deprecated."""

import importlib
import logging
import sys

import pytest

import berth_contract.request_spec
from scheduler.policy import deprecated_paths


@pytest.mark.parametrize("name", deprecated_paths.MOVED_TO_CONTRACT)
def test_the_old_path_gives_the_contracts_module_with_a_warning(monkeypatch, caplog, name):
    monkeypatch.delitem(sys.modules, f"scheduler.policy.{name}", raising=False)
    with pytest.warns(DeprecationWarning, match=f"import berth_contract.{name} "), \
            caplog.at_level(logging.WARNING, logger=deprecated_paths.__name__):
        old = importlib.import_module(f"scheduler.policy.{name}")
    assert old is importlib.import_module(f"berth_contract.{name}")
    [said] = caplog.messages
    assert said.startswith(f"{__file__}:") and f"scheduler.policy.{name} is deprecated" in said


def test_a_plugins_from_import_reads_the_same_classes(monkeypatch):
    monkeypatch.delitem(sys.modules, "scheduler.policy.request_spec", raising=False)
    with pytest.warns(DeprecationWarning):
        from scheduler.policy.request_spec import RequestSpec
    assert RequestSpec is berth_contract.request_spec.RequestSpec


def test_what_did_not_move_is_not_found():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("scheduler.policy.host_report")


@pytest.mark.parametrize("old, new", [
    ("scheduler.policy.rebalance_goals", "scheduler.moves.goals"),
    ("scheduler.policy.rebalance_goals.balance", "scheduler.moves.goals.balance"),
    ("scheduler.policy.rebalance", "scheduler.moves.rebalance"),
    ("scheduler.policy.rebalance.snapshot", "scheduler.moves.rebalance.snapshot"),
])
def test_a_rebalance_goal_written_against_the_old_paths_gets_the_same_modules(monkeypatch, old, new):
    for name in list(sys.modules):
        if name.startswith("scheduler.policy.rebalance"):
            monkeypatch.delitem(sys.modules, name)
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: import {new} "):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


def test_a_goal_importing_the_old_names_builds_the_same_plan_class(monkeypatch):
    for name in list(sys.modules):
        if name.startswith("scheduler.policy.rebalance"):
            monkeypatch.delitem(sys.modules, name)
    with pytest.warns(DeprecationWarning):
        old = importlib.import_module("scheduler.policy.rebalance")
        snapshot = importlib.import_module("scheduler.policy.rebalance.snapshot")
    from scheduler.moves.rebalance import PlannedMove, RebalancePlan, Snapshot

    assert (old.Plan, old.Migration, snapshot.Snapshot) == (RebalancePlan, PlannedMove, Snapshot)
    plan = old.Plan([old.Migration("i", "a", "b", "why", 512.0)], [], "greedy", False)
    assert plan.migrations == plan.moves and plan.memory_mb == 512.0
