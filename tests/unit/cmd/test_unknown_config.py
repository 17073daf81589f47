"""A section or option of a configuration file that no Berth program reads is said at start, with
the nearest known name; [DEFAULT] strict_config refuses to start on it."""

import configparser
import re
import subprocess
import sys
from importlib import metadata

import pytest
from oslo_config import cfg

from compute_agent import conf as agent_conf
from compute_agent.driver import installed
from scheduler import conf as berth_conf
from scheduler.cmd import common
from scheduler.policy import filters, weighers
from scheduler.process import known_options, unknown_config
from scheduler.process import startup as config
from tests.docs_pages import ROOT
from tests.unit.logs import service_log


def load(tmp_path, text, prog="berth", **kwargs):
    path = tmp_path / "berth.conf"
    path.write_text(text)
    return config.load(["--config-file", str(path)], prog, **kwargs), path


def said_by_berth(tmp_path, capsys, text):
    """The lines ``berth`` writes on standard error for ``text`` before running a command."""
    conf, path = load(tmp_path, text)
    config.setup_command_logging(conf, "berth")
    return capsys.readouterr().err.splitlines(), path


def test_a_misspelt_option_is_named_with_its_file_and_the_nearest_option(tmp_path, capsys):
    lines, path = said_by_berth(tmp_path, capsys, "[compute_agent]\nfake_memroy_mb = 4096\n")
    assert lines == [f"berth: warning: {path}: unknown option [compute_agent] fake_memroy_mb, ignored: "
                     "did you mean [compute_agent] fake_memory_mb?"]


def test_a_misspelt_section_is_named_with_the_nearest_section(tmp_path, capsys):
    lines, path = said_by_berth(tmp_path, capsys,
                                "[compute_agnet]\nreserved_host_memory_mb = 0\nreport_interval = 5\n")
    assert lines == [f"berth: warning: {path}: unknown section [compute_agnet], ignored with its 2 options: "
                     "did you mean [compute_agent]?"]


def test_an_option_under_the_wrong_section_names_the_section_it_belongs_to(tmp_path, capsys):
    lines, _ = said_by_berth(tmp_path, capsys, "[compute_agent]\nhost = vm\n")
    assert lines[0].endswith("unknown option [compute_agent] host, ignored: did you mean [DEFAULT] host?")


def test_a_name_like_none_known_points_at_the_sample_configuration(tmp_path, capsys):
    lines, _ = said_by_berth(tmp_path, capsys, "[DEFAULT]\nzzzzqqqq = 1\n")
    assert lines[0].endswith("unknown option [DEFAULT] zzzzqqqq, ignored: "
                             "etc/berth/berth.conf.sample lists every section and option")


def test_each_unknown_name_is_one_line_and_said_once(tmp_path, capsys):
    conf, _ = load(tmp_path, "[DEFAULT]\ndebgu = true\n[schedular]\nx = 1\n")
    config.setup_command_logging(conf, "berth")
    config.setup_command_logging(conf, "berth")
    lines = capsys.readouterr().err.splitlines()
    assert [re.sub(r".*: (unknown [a-z]+ \[\w+\]).*", r"\1", line) for line in lines] == [
        "unknown option [DEFAULT]", "unknown section [schedular]"]


def test_a_daemon_logs_it_as_a_warning_and_says_it_on_its_terminal_too(tmp_path, capsys):
    conf, path = load(tmp_path, "[scheduler]\nmax_atempts = 5\n", prog="berth-scheduler",
                      **common.SCHEDULER_SETUP)
    capsys.readouterr()
    with service_log(conf, tmp_path / "scheduler.log") as lines:
        logged = [line for line in lines() if "unknown option" in line]
    said = (f"{path}: unknown option [scheduler] max_atempts, ignored: "
            "did you mean [scheduler] max_attempts?")
    assert len(logged) == 1
    assert " WARNING " in logged[0]
    assert logged[0].endswith(said)
    # Its log is a file: the terminal it was started from hears it as well.
    assert capsys.readouterr().err == f"berth-scheduler: warning: {said}\n"


def test_strict_config_refuses_to_start_with_one_line(tmp_path):
    with pytest.raises(SystemExit) as info:
        load(tmp_path, "[DEFAULT]\nstrict_config = true\n[compute_agnet]\ndriver = fake\n"
             "[compute_agent]\nfake_memroy_mb = 4096\n", prog="berth-compute-agent",
             register=[agent_conf.register_opts], validators=[agent_conf.check_driver],
             areas=berth_conf.AGENT_AREAS)
    message = str(info.value)
    # the misspelt section, not the driver it leaves unset
    assert message == (f"berth-compute-agent: invalid configuration: {tmp_path / 'berth.conf'}: unknown "
                       "section [compute_agnet] (1 option): did you mean [compute_agent]? (and 1 more); "
                       "[DEFAULT] strict_config refuses names Berth does not know")


def test_a_start_refused_for_another_reason_says_the_unknown_names_first(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        load(tmp_path, "[compute_agnet]\ndriver = fake\n", prog="berth-compute-agent",
             register=[agent_conf.register_opts], validators=[agent_conf.check_driver],
             areas=berth_conf.AGENT_AREAS)
    assert str(info.value).startswith("berth-compute-agent: invalid configuration: [compute_agent] driver is "
                                      "not set")
    assert capsys.readouterr().err.splitlines() == [
        f"berth-compute-agent: warning: {tmp_path / 'berth.conf'}: unknown section [compute_agnet], ignored "
        "with its 1 option: did you mean [compute_agent]?"]


def test_strict_config_starts_on_known_names(tmp_path, capsys):
    conf, _ = load(tmp_path, "[DEFAULT]\nstrict_config = true\n[compute_agent]\nfake_memory_mb = 4096\n")
    config.setup_command_logging(conf, "berth")
    assert capsys.readouterr().err == ""


LIBRARIES_AND_OTHER_PROGRAMS = """\
[DEFAULT]
debug = true
log_dir = /tmp
default_log_levels = kombu=INFO
use_journal = false
[database]
connection = sqlite://
[oslo_messaging_rabbit]
heartbeat_timeout_threshold = 30
[scheduler]
max_attempts = 3
[filter_scheduler]
ram_weight_multiplier = 2.0
[fake]
memory_mb = 8192
[compute_agent]
driver = fake
[qemu]
images_path = /tmp
[roles]
"""


@pytest.mark.parametrize("areas", [berth_conf.AREAS, berth_conf.AGENT_AREAS], ids=["scheduler", "agent"])
def test_sections_of_libraries_and_of_the_other_programs_are_known(tmp_path, capsys, areas):
    conf, _ = load(tmp_path, LIBRARIES_AND_OTHER_PROGRAMS, areas=areas)
    assert unknown_config.find(conf) == []
    config.setup_command_logging(conf, "berth")
    assert capsys.readouterr().err == ""


def test_every_option_of_the_sample_configuration_is_known(tmp_path):
    """berth.conf.sample, every option set: what a compute agent knows of them all."""
    sample = configparser.ConfigParser(interpolation=None, default_section="none")  # [DEFAULT] as any
    sample.optionxform = str
    text = (ROOT / "etc/berth/berth.conf.sample").read_text()
    sample.read_string(re.sub(r"^#(\w+) = ", r"\1 = ", text, flags=re.M))
    lines = [f"[{section}]\n" + "".join(f"{name} = {value}\n" for name, value in sample[section].items())
             for section in sample.sections()]
    assert sum(len(section.splitlines()) for section in lines) > 200
    path = tmp_path / "all.conf"
    path.write_text("".join(lines))
    conf = cfg.ConfigOpts()
    berth_conf.register_opts(conf, berth_conf.AGENT_AREAS)
    conf(["--config-file", str(path)], project="berth", default_config_files=[])
    assert unknown_config.find(conf) == []


def test_the_commands_own_options_set_in_a_file_are_known(tmp_path, capsys):
    lines, _ = said_by_berth(tmp_path, capsys, "[DEFAULT]\nagents = 3\nagent_prefix = lab\n"
                             "connect_timeout = 2\nagent_host = c1\nagentz = 3\n")
    assert len(lines) == 1
    assert lines[0].endswith("unknown option [DEFAULT] agentz, ignored: did you mean [DEFAULT] agents?")


SHARED = """\
[DEFAULT]
transport_url = memory://
ram_allocation_ratio = 1.0
[database]
connection = sqlite://
[scheduler]
max_attempts = 3
[compute_agnet]
driver = fake
"""


def test_berth_judges_only_the_names_near_those_it_reads(tmp_path, capsys):
    """berth reads a few sections (CLI_AREAS, to start quickly): the daemons' sections and options
    of a shared file, a misspelt daemon's section included, are the daemons' to judge."""
    conf, path = load(tmp_path, SHARED + "[DEFAULT]\ntransport_ulr = memory://\n", areas=berth_conf.CLI_AREAS)
    config.setup_command_logging(conf, "berth")
    assert capsys.readouterr().err.splitlines() == [
        f"berth: warning: {path}: unknown option [DEFAULT] transport_ulr, ignored: "
        "did you mean [DEFAULT] transport_url?"]


def test_berth_imports_no_daemon_module_to_check_a_shared_file(tmp_path):
    path = tmp_path / "berth.conf"
    path.write_text(SHARED)
    script = ("import sys; from scheduler import conf; from scheduler.process import startup; "
              f"startup.load(['--config-file', {str(path)!r}], 'berth', areas=conf.CLI_AREAS); "
              "print([m for m in ('scheduler.conf.opts', 'compute_agent.conf', 'scheduler.policy') "
              "if m in sys.modules], startup._UNKNOWN)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[] []", done.stderr


def test_the_table_of_berths_names_is_its_declarations():
    """known_options, which a program checks a file against without importing the services, lists
    every option they declare and no other."""
    table = {section: set(names) for section, names in known_options.SECTIONS.items()}
    assert table == unknown_config.declared(), "run tools/write-known-options"


def test_an_agent_imports_no_scheduler_module_to_check_a_shared_file_and_names_its_misspellings(tmp_path):
    """A compute agent whose file holds the scheduler's sections judges their names from the table:
    a misspelt one is still said, with the nearest name."""
    path = tmp_path / "berth.conf"
    path.write_text(SHARED + "[scheduler]\nmax_atempts = 5\n")
    script = ("import sys; from compute_agent import conf as agent_conf; from scheduler import conf; "
              "from scheduler.process import startup; "
              f"startup.load(['--config-file', {str(path)!r}], 'berth-compute-agent', "
              "register=[agent_conf.register_opts], areas=conf.AGENT_AREAS); "
              "print([m for m in ('scheduler.conf.opts', 'scheduler.policy', 'scheduler.db', "
              "'scheduler.cmd') if m in sys.modules]); print(*startup._UNKNOWN, sep='\\n')")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == [
        "[]",
        f"{path}: unknown option [scheduler] max_atempts, ignored: did you mean [scheduler] max_attempts?",
        f"{path}: unknown section [compute_agnet], ignored with its 1 option: did you mean [compute_agent]?",
    ], done.stderr


def test_only_other_distributions_plugins_may_add_names_the_table_lacks(monkeypatch):
    assert set(unknown_config.PLUGIN_GROUPS) == {filters.ENTRY_POINTS, weighers.ENTRY_POINTS, installed.GROUP}
    eps = metadata.EntryPoints([
        metadata.EntryPoint("fake", "compute_agent.driver.fake:FakeDriver", installed.GROUP),
        metadata.EntryPoint("Mine", "my_filters.mine:Mine", filters.ENTRY_POINTS),
        metadata.EntryPoint("vbox", "vbox_driver:VBoxDriver", installed.GROUP),
        metadata.EntryPoint("berth", "scheduler.cmd.entry:main", "console_scripts"),
    ])
    monkeypatch.setattr(unknown_config, "entry_points", lambda: eps)
    assert [ep.name for ep in unknown_config.other_distributions_plugins()] == ["Mine", "vbox"]
