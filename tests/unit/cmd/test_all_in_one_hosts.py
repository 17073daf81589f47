"""The all-in-one's agents are named as the documentation shows them, whatever the machine's name."""

import pytest

from scheduler.cmd import all_in_one
from scheduler.process import startup as config


def load(tmp_path, *argv):
    path = tmp_path / "berth.conf"
    path.write_text("[DEFAULT]\nhost = laptop\n")
    return config.load(["--config-file", str(path), *argv], "berth-all-in-one", cli_opts=all_in_one.cli_opts,
                       validators=[all_in_one.check_agent_prefix])


def test_the_agents_are_vm_compute_n_on_any_machine(tmp_path):
    assert all_in_one.agent_hosts(load(tmp_path, "--agents", "3")) == [
        "vm-compute-1", "vm-compute-2", "vm-compute-3"]


def test_an_agent_prefix_names_them_otherwise(tmp_path):
    assert all_in_one.agent_hosts(load(tmp_path, "--agents", "2", "--agent-prefix", "lab")) == [
        "lab-compute-1", "lab-compute-2"]


def test_a_prefix_that_cannot_name_a_host_stops_start_up_with_one_line(tmp_path):
    with pytest.raises(SystemExit) as info:
        load(tmp_path, "--agent-prefix", "x" * 300)
    assert str(info.value).startswith("berth-all-in-one: invalid configuration: --agent-prefix: 'xxx")
    assert "an agent's host name, is" in str(info.value)
    assert "\n" not in str(info.value)
