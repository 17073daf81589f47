"""An unknown option of a command is refused by that command: its usage, the option named,
and the option meant when one is close."""

import pytest

from scheduler.cmd import cli


def refusal(capsys, *argv):
    with pytest.raises(SystemExit) as info:
        cli.main(list(argv))
    return info.value.code, capsys.readouterr().err.splitlines()


def test_a_misspelt_option_names_the_command_the_option_and_what_it_likely_means(capsys):
    status, err = refusal(capsys, "boot", "--flavour", "m1.tiny")
    assert status == 2
    assert err[0].startswith("usage: berth server create [-h] [--flavor FLAVOR]")
    assert err[-1] == "berth server create: error: unrecognized arguments: --flavour: did you mean --flavor?"
    assert not any("--log-file" in line for line in err)  # not berth's own usage


def test_an_action_of_a_command_refuses_with_its_own_usage(capsys):
    status, err = refusal(capsys, "flavor", "list", "--long")
    assert status == 2
    assert err[0].startswith("usage: berth flavor list")
    assert err[-1] == "berth flavor list: error: unrecognized arguments: --long"


def test_an_option_near_none_is_named_without_a_guess(capsys):
    status, err = refusal(capsys, "instances", "--bogus")
    assert (status, err[-1]) == (2, "berth server list: error: unrecognized arguments: --bogus")


def test_an_extra_word_is_named(capsys):
    status, err = refusal(capsys, "instances", "extra")
    assert (status, err[-1]) == (2, "berth server list: error: unrecognized arguments: extra")


def test_a_bad_choice_names_the_option_with_the_commands_usage(capsys):
    status, err = refusal(capsys, "instances", "--state", "bogus")
    assert status == 2
    assert err[0].startswith("usage: berth server list")
    assert err[-1].startswith("berth server list: error: argument --state: invalid choice: 'BOGUS'")


def test_berth_manage_refuses_in_the_action_too(capsys):
    from scheduler.cmd import manage

    status = manage.main(["db", "purge", "--bfore", "3d"])
    err = capsys.readouterr().err.splitlines()
    assert status == 2
    assert err[0].startswith("usage: berth-manage db purge")
    assert err[-1] == "berth-manage db purge: error: unrecognized arguments: --bfore: did you mean --before?"
