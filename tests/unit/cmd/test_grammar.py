"""One grammar for every command: ``berth server create``, ``berth flavor list``; the verbs of
earlier releases as aliases; ``berth help``; a near word named for a misspelt one; Ctrl-C."""

import contextlib
import io
import os
import signal
import subprocess
import sys
import time

import pytest

from scheduler.cmd import cli, grammar
from tests.unit.cli_scheduler import cli_scheduler, main, parse, write_conf


@pytest.fixture
def conf_file(tmp_path):
    return write_conf(tmp_path)


@pytest.mark.parametrize(("words", "old"), [
    (["server", "create", "--flavor", "m1.tiny"], ["boot", "--flavor", "m1.tiny"]),
    (["server", "list"], ["instances"]),
    (["server", "show", "web-1"], ["show", "web-1"]),
    (["server", "delete", "web-1"], ["delete", "web-1"]),
    (["server", "migrate", "web-1", "--live"], ["migrate", "web-1", "--live"]),
    (["server", "resize", "web-1", "--confirm"], ["resize", "web-1", "--confirm"]),
    (["server", "reboot", "web-1", "--hard"], ["reboot", "web-1", "--hard"]),
    (["server", "migration", "list"], ["migrations"]),
    (["server", "group", "list"], ["server-group", "list"]),
    (["server", "metric", "show", "web-1"], ["instance-metric", "show", "web-1"]),
    (["console", "log", "show", "web-1"], ["console-log", "web-1"]),
    (["host", "list"], ["hosts"]),
    (["scaling", "group", "list"], ["scaling-group", "list"]),
])
def test_the_grammar_and_an_earlier_release_verbs_run_the_same_command(conf_file, words, old):
    new, kept = parse(conf_file, *words), parse(conf_file, *old)
    assert new.func is kept.func
    for given in ("flavor", "reference", "live", "confirm", "hard"):
        assert getattr(new, given, None) == getattr(kept, given, None)


def test_every_route_reaches_a_command_of_its_module(conf_file):
    for route in grammar.ROUTES:
        if route.words in grammar.GROUPS:
            continue
        argv = list(route.words) + (["--file", "x"] if route.words == ("simulate",) else [])
        try:
            command = parse(conf_file, *argv)
        except SystemExit:  # a required argument missing: the parser is there all the same
            continue
        assert command.func.__module__ == route.module


def test_help_lists_the_commands_first_then_the_aliases_then_the_options():
    out = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        cli.load(["help"], out=out)
    assert exited.value.code == 0
    lines = out.getvalue().splitlines()
    assert lines[0] == "usage: berth [OPTIONS] COMMAND [ARGUMENTS]"
    commands = lines.index("commands:")
    assert commands < 5
    assert lines[commands + 1].split()[:2] == ["server", "create"]
    listed = [line.strip().split("  ")[0] for line in lines[commands + 1:] if line.startswith("  ")]
    for words in ("server list", "flavor create", "host drain", "rebalance apply", "scaling group what-if",
                  "server migration list", "console log show", "simulate"):
        assert words in listed
    said = out.getvalue()
    assert said.index("boot = server create") > said.index("simulate")
    assert said.index("--config-file") > said.index("boot = server create")
    assert "--shell_completion" not in said.split("options (before the command):")[0]


@pytest.mark.parametrize("argv", [["help", "server", "create"], ["server", "create", "--help"],
                                  ["help", "boot"], ["boot", "--help"]])
def test_help_of_one_command_in_the_grammar_words(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.load(argv)
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("usage: berth server create [-h] [--flavor FLAVOR]")


@pytest.mark.parametrize(("argv", "said"), [
    (["sever", "list"], "berth: 'sever' is not a command: did you mean 'server'? (berth help lists them)"),
    (["server", "lsit"], "berth: 'server lsit' is not a command: did you mean 'server list'? "
                         "(berth help server lists them)"),
    (["flavor", "creat"], "berth: 'flavor creat' is not a command: did you mean 'flavor create'? "
                          "(berth help flavor lists them)"),
    (["instancse"], "berth: 'instancse' is not a command: did you mean 'instances'? (berth help lists them)"),
    (["frobnicate"], "berth: 'frobnicate' is not a command (berth help lists them)"),
])
def test_a_misspelt_command_is_refused_with_the_nearest(conf_file, capsys, argv, said):
    with pytest.raises(SystemExit) as exited:
        parse(conf_file, *argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == said


def test_a_group_alone_lists_its_actions_from_every_module(conf_file, capsys):
    with pytest.raises(SystemExit) as exited:
        parse(conf_file, "host")
    assert exited.value.code == 0
    actions = capsys.readouterr().out
    assert actions.startswith("usage: berth host [-h] ACTION ...")
    for verb in ("list", "show", "drain", "evacuate"):  # host_commands' and move_commands' actions
        assert f"\n    {verb} " in actions


def test_ctrl_c_is_one_line_and_status_130(conf_file, monkeypatch, capsys):
    def interrupted(client, args, out):
        raise KeyboardInterrupt

    with cli_scheduler(conf_file, lambda conf, database, manager: []):
        monkeypatch.setattr("scheduler.cmd.host_commands.hosts_command", interrupted)
        status, _ = main(conf_file, "host", "list")
    assert status == 130
    assert capsys.readouterr().err.strip() == "berth: interrupted"


def test_a_listing_imports_no_database_policy_simulation_or_server_code(tmp_path):
    conf_file = write_conf(tmp_path)
    probe = (
        "import sys\n"
        "from scheduler.cmd import cli\n"
        "from scheduler import rpc\n"
        "from scheduler.client import SchedulerClient\n"
        f"cli.load(['--config-file', {str(conf_file)!r}, 'server', 'list'])\n"
        "heavy = ('sqlalchemy', 'numpy', 'scipy', 'alembic', 'prometheus_client', 'os_traits',\n"
        "         'scheduler.db', 'scheduler.policy', 'scheduler.simulation', 'scheduler.moves',\n"
        "         'scheduler.planning', 'scheduler.rpc.server', 'scheduler.cmd.simulate_command')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


#: berth's entry point, saying on the fd MARKER_FD when it starts importing the command line (its handler of
#: Ctrl-C in place): a signal before Python runs it is Python's, not berth's, to answer.
MARKED_ENTRY = (
    "import importlib, os, sys\n"
    "from scheduler.cmd.entry import main\n"
    "real = importlib.import_module\n"
    "def marked(name, *args):\n"
    "    os.write(int(os.environ['MARKER_FD']), b'importing\\n')\n"
    "    return real(name, *args)\n"
    "importlib.import_module = marked\n"
    "sys.exit(main())\n")


@contextlib.contextmanager
def _berth_importing(tmp_path):
    """``berth server list`` against a broker that never answers, by MARKED_ENTRY: yields the
    process once it has begun importing the command line (its Ctrl-C handler in place)."""
    conf_file = tmp_path / "berth.conf"
    conf_file.write_text("[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:1/\n")
    marker_read, marker_write = os.pipe()
    try:
        berth = subprocess.Popen(
            [sys.executable, "-c", MARKED_ENTRY,
             "--config-file", str(conf_file), "--connect-timeout", "30", "server", "list"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            pass_fds=(marker_write,), env=dict(os.environ, MARKER_FD=str(marker_write)))
    finally:
        os.close(marker_write)
    with os.fdopen(marker_read, "rb") as marker:  # open until it ends: it writes at each import
        assert marker.readline() == b"importing\n"
        yield berth


@pytest.mark.parametrize("after", [0.0, 0.6])
def test_ctrl_c_while_starting_or_reaching_the_broker_is_one_line_and_status_130(tmp_path, after):
    """Twice, as ``timeout -s INT`` signals the process and its group: still one line. At 0.0: as
    soon as berth's entry point runs, while it imports the rest."""
    with _berth_importing(tmp_path) as berth:
        time.sleep(after)
        berth.send_signal(signal.SIGINT)
        berth.send_signal(signal.SIGINT)
        out, err = berth.communicate(timeout=60)
    assert (berth.returncode, out) == (130, "")
    assert err.splitlines() == ["berth: interrupted"]


@pytest.mark.parametrize("echo_after", [0.0, 0.01, 0.02, 0.04, 0.08])
def test_a_second_ctrl_c_while_berth_exits_from_the_first_is_still_status_130(tmp_path, echo_after):
    """The echo lands after the line, while Python finalizes (where SIGINT has its default action
    back unless berth ignores it): still status 130, not killed by the signal."""
    with _berth_importing(tmp_path) as berth:
        time.sleep(0.6)
        berth.send_signal(signal.SIGINT)
        line = berth.stderr.readline()
        time.sleep(echo_after)
        berth.send_signal(signal.SIGINT)
        berth.wait(timeout=60)
    assert (berth.returncode, berth.stdout.read(), line + berth.stderr.read()) == (
        130, "", "berth: interrupted\n")


@pytest.mark.parametrize(("argv", "said"), [
    (["--conifg-file", "/dev/null", "server", "list"],
     "berth: unknown option --conifg-file before the command: did you mean --config-file? "
     "(berth help lists the options every command takes)"),
    (["--conf", "x", "server", "list"],
     "berth: ambiguous option --conf before the command: did you mean --config-file or --config-dir? "
     "(berth help lists the options every command takes)"),
])
def test_a_misspelt_option_before_the_command_is_named_not_taken_for_the_command(capsys, argv, said):
    with pytest.raises(SystemExit) as exited:
        cli.load(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip() == said


def test_an_option_of_every_command_after_the_words_is_said_to_go_before(conf_file, capsys):
    with pytest.raises(SystemExit):
        parse(conf_file, "server", "list", "--debug")
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "berth server list: error: unrecognized arguments: --debug: --debug is an option of every "
        "command: give it before the command")


def test_the_options_before_the_command_are_those_help_lists():
    out = io.StringIO()
    with pytest.raises(SystemExit):
        cli.load(["help"], out=out)
    options = out.getvalue().split("options (before the command):")[1]
    listed = {name.strip(",") for line in options.splitlines() if line.startswith("  -")
              for name in line.split() if name.startswith("-")}
    assert listed == set(cli.GLOBAL_VALUES + cli.GLOBAL_FLAGS)
    assert not options.rstrip().endswith("COMMAND")


@pytest.mark.parametrize(("argv", "said"), [
    (["server", "create", "--flavor-ram", "512"],
     "berth: give --flavor NAME, or --flavor-ram and --flavor-vcpus (and --flavor-disk)"),
    (["server", "create", "--flavor", "m1.tiny", "--flavor-vcpus", "2"],
     "berth: give either --flavor or --flavor-ram/--flavor-disk/--flavor-vcpus"),
    (["scaling", "group", "create", "web", "--flavor", "m1.tiny"],
     "berth: give --max N (or a --spec file that holds max)"),
])
def test_options_that_do_not_go_together_are_a_usage_error_status_2(conf_file, capsys, argv, said):
    """As argparse says of what it finds itself: a script tells a usage error from a refusal."""
    status, out = main(conf_file, *argv)
    assert (status, out) == (2, "")
    assert capsys.readouterr().err.strip() == said
