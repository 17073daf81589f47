"""Options that no longer do anything still load from an operator's configuration file for a
release, and the service's log says to remove them."""

from oslo_log import versionutils

from scheduler import conf as berth_conf
from scheduler.conf import default
from tests.unit.logs import service_log


def test_a_file_setting_oslo_log_fast_paths_still_starts_and_the_log_says_to_remove_it(tmp_path, monkeypatch):
    config_file = tmp_path / "berth.conf"
    config_file.write_text("[DEFAULT]\noslo_log_fast_paths = false\n")
    conf = berth_conf.new_conf()
    conf(["--config-file", str(config_file)], project="berth", default_config_files=[])
    option = next(opt for opt in default.opts if opt.name == "oslo_log_fast_paths")
    # oslo.config says it once per option and oslo.log once per message, each per process;
    # another test of this process may have had it said already.
    monkeypatch.setattr(option, "_logged_deprecation", False)
    monkeypatch.setattr(versionutils, "_deprecated_messages_sent", {})
    with service_log(conf, tmp_path / "scheduler.log") as lines:
        said = [line for line in lines() if "oslo_log_fast_paths" in line]
    assert len(said) == 1
    assert "WARNING" in said[0] and "deprecated for removal" in said[0] and "remove it" in said[0]
