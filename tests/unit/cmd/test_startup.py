import pytest
from oslo_config import cfg

from scheduler.cmd import common
from scheduler.process import startup as config


def load(tmp_path, text, **kwargs):
    path = tmp_path / "berth.conf"
    path.write_text(text)
    return config.load(["--config-file", str(path)], "berth-scheduler", **kwargs)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[filter_scheduler]\nhost_subset_size = abc\n",
         "berth-scheduler: invalid configuration: [filter_scheduler] host_subset_size: "
         "not an integer: 'abc'"),
        ("[filter_scheduler]\nhost_subset_size = 0\n",
         "[filter_scheduler] host_subset_size: Should be greater than or equal to 1"),
        ("[DEFAULT]\nrpc_response_timeout = soon\n", "[DEFAULT] rpc_response_timeout:"),
        ("[scheduler]\nmax_attempts = -1\n", "[scheduler] max_attempts:"),
    ],
)
def test_a_bad_value_stops_start_up_with_one_line_naming_it(tmp_path, text, message):
    with pytest.raises(SystemExit) as info:
        load(tmp_path, text)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_an_unknown_filter_stops_start_up(tmp_path):
    with pytest.raises(SystemExit) as info:
        load(tmp_path, "[filter_scheduler]\nenabled_filters = RamFilter,NoSuchFilter\n",
             **common.SCHEDULER_SETUP)
    assert "[filter_scheduler] enabled_filters: unknown filter 'NoSuchFilter'" in str(info.value)
    assert "RamFilter" in str(info.value)  # the installed ones are listed


def test_a_missing_config_file_is_named(tmp_path):
    with pytest.raises(SystemExit) as info:
        config.load(["--config-file", str(tmp_path / "nope.conf")], "berth")
    assert "nope.conf" in str(info.value)


def test_good_values_are_read(tmp_path):
    conf = load(tmp_path, "[filter_scheduler]\nhost_subset_size = 3\nram_weight_multiplier = -1\n",
                **common.SCHEDULER_SETUP)
    assert conf.filter_scheduler.host_subset_size == 3
    assert conf.filter_scheduler.ram_weight_multiplier == -1.0


CLI_OPTS = [cfg.IntOpt("agents", default=4, min=1, max=1000),
            cfg.FloatOpt("connect-timeout", default=5.0, min=0.0)]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--agents", "-1"],
         "berth-x: invalid configuration: --agents: Should be greater than or equal to 1 (given '-1')"),
        (["--agents=2000"],
         "berth-x: invalid configuration: --agents: Should be less than or equal to 1000 (given '2000')"),
        (["--agents", "many"], "berth-x: invalid configuration: --agents: not an integer: 'many'"),
        (["--connect-timeout", "soon"],
         "berth-x: invalid configuration: --connect-timeout: not a number: 'soon'"),
    ],
)
def test_a_bad_command_line_value_is_named_with_the_program_and_the_reason(capsys, argv, message):
    with pytest.raises(SystemExit) as info:
        config.load(argv, "berth-x", cli_opts=CLI_OPTS)
    assert str(info.value) == message
    assert capsys.readouterr().err == ""  # not oslo.config's line besides


def test_argparse_errors_and_help_are_left_as_they_were(capsys):
    with pytest.raises(SystemExit) as info:
        config.load(["--agents", "2", "--nope"], "berth-x", cli_opts=CLI_OPTS)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: berth-x") and "unrecognized arguments: --nope" in err
    with pytest.raises(SystemExit) as info:
        config.load(["--help"], "berth-x", cli_opts=CLI_OPTS)
    assert info.value.code == 0
    assert "--connect-timeout" in capsys.readouterr().out


def test_good_command_line_values_are_read():
    conf = config.load(["--agents", "7", "--connect-timeout=0.5"], "berth-x", cli_opts=CLI_OPTS)
    assert (conf.agents, conf.connect_timeout) == (7, 0.5)
