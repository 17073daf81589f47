import pytest

from scheduler.cmd import common
from scheduler.cmd import startup as config


def load(tmp_path, text, **kwargs):
    path = tmp_path / "berth.conf"
    path.write_text(text)
    return config.load(["--config-file", str(path)], "berth-scheduler", **kwargs)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[filter_scheduler]\nhost_subset_size = abc\n",
         "berth-scheduler: invalid configuration: [filter_scheduler] host_subset_size: "
         "invalid literal for int() with base 10: 'abc'"),
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
