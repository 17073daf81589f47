"""Each usage a documentation page quotes (``usage: berth ...``, ``usage: berth-manage ...``) is
the one the command's parser prints today, wrapped at 80 columns as the pages quote it."""

import re

import pytest

from scheduler.cmd import cli, manage
from tests.docs_pages import pages

MAINS = {"berth": cli.main, "berth-manage": manage.main}
USAGE = re.compile(r"^usage: (berth(?:-manage)?) (.*)\n((?: {8,}\S.*\n)*)", re.M)


def quoted():
    """(page, program, its subcommand's words, the usage as the page prints it)."""
    return [(path.name, match.group(1), subcommand(match.group(2)), match.group(0))
            for path in pages() for match in USAGE.finditer(path.read_text())]


def subcommand(rest):
    """The subcommand's words: those before the first ``[`` or option."""
    words = []
    for word in rest.split():
        if word.startswith(("[", "-", "{")) or not re.fullmatch(r"[a-z][a-z-]*", word):
            break
        words.append(word)
    return words


QUOTED = quoted()


def test_the_pages_quote_usages_of_both_programs():
    assert {program for _, program, _, _ in QUOTED} == {"berth", "berth-manage"}


@pytest.mark.parametrize(("page", "program", "words", "usage"), QUOTED,
                         ids=[f"{p}:{prog} {' '.join(w)}" for p, prog, w, _ in QUOTED])
def test_each_quoted_usage_is_the_parsers(page, program, words, usage, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    with pytest.raises(SystemExit) as exited:
        code = MAINS[program]([*words, "--help"])
        raise SystemExit(code)
    assert exited.value.code in (0, None)
    printed = capsys.readouterr().out
    assert printed.startswith(usage), f"{page} quotes:\n{usage}\nthe parser prints:\n{printed[:len(usage)]}"
