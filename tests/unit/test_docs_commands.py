"""Each ``berth`` command the pages show is one the command line takes today: every command line
of their ``sh`` blocks and every ``$ berth ...`` of their ``console`` blocks parses, and every
``berth ...`` their prose names is a command (prose may leave its arguments out)."""

import contextlib
import io
import re
import shlex

import pytest
from oslo_config import cfg

from scheduler.cmd import cli
from tests.docs_pages import blocks, pages

#: What a command line quoted in prose may hold that is no argument: placeholders, choices, more.
PROSE_ONLY = re.compile(r"[\[<{…]|\.\.\.|\$\(|\\|--\S+/--|\w: ")


def commands(text):
    """(where, the command line) of every ``berth`` command of a page's text."""
    for lang in ("sh", "console"):
        for block in blocks(lang, text):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.strip()
                if lang == "console":
                    if not line.startswith("$ "):
                        continue  # what a command printed
                    line = line[2:]
                if line.startswith("berth ") and not PROSE_ONLY.search(line):  # not a synopsis
                    yield "block", _alone(line)
    for span in re.findall(r"`(berth [^`\n]+)`", text):
        if not PROSE_ONLY.search(span):
            yield "prose", _alone(span)


def _alone(line):
    """The command line without its comment, its pipe or what follows it."""
    line = re.split(r"\s+#\s", line)[0]
    return re.split(r"\s[|;]\s|\s&&\s|\s[12]?>", line)[0].strip()


def refusal(conf_file, line):
    """berth's last line of refusal of ``line``, or None when it parses."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
            cli.load(["--config-file", str(conf_file), *shlex.split(line)[1:]], conf=cfg.ConfigOpts())
    except SystemExit as exited:
        if exited.code not in (0, None):
            return (said.getvalue().strip().splitlines() or ["(nothing said)"])[-1]
    return None


@pytest.mark.parametrize("path", pages(), ids=lambda path: path.name)
def test_every_command_a_page_shows_is_one_berth_takes(path, tmp_path):
    conf_file = tmp_path / "berth.conf"
    conf_file.write_text("[DEFAULT]\ntransport_url = memory://\n")
    wrong = []
    for where, line in commands(path.read_text()):
        said = refusal(conf_file, line)
        # Prose names a command and may leave out what it needs: only its words must be right.
        if said is not None and (where == "block" or "is not a command" in said or "unrecognized" in said):
            wrong.append(f"{where}: {line}: {said}")
    assert not wrong, "\n".join(wrong)


def test_the_check_finds_a_command_that_is_no_more(tmp_path):
    conf_file = tmp_path / "berth.conf"
    conf_file.write_text("[DEFAULT]\ntransport_url = memory://\n")
    page = "Run `berth evacuate HOST` or:\n```sh\nberth server lsit\nberth server list   # all\n```\n"
    found = {line: refusal(conf_file, line) for _, line in commands(page)}
    assert found == {
        "berth evacuate HOST": "berth: 'evacuate' is not a command (berth help lists them)",
        "berth server lsit": "berth: 'server lsit' is not a command: did you mean 'server list'? "
                             "(berth help server lists them)",
        "berth server list": None,
    }
