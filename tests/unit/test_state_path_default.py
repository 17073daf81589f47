"""[DEFAULT] state_path: /var/lib/berth for a systemd service, the user's XDG state directory otherwise."""

import pytest

from scheduler.conf import default

SYSTEMD = ("INVOCATION_ID", "NOTIFY_SOCKET", "MANAGERPID")


@pytest.fixture
def env(monkeypatch, tmp_path):
    """No systemd, no XDG_STATE_HOME, HOME in tmp_path."""
    for name in SYSTEMD + ("XDG_STATE_HOME",):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return monkeypatch


def test_from_a_shell_it_is_the_users_state_directory(env, tmp_path):
    assert default._default_state_path() == str(tmp_path / "home" / ".local" / "state" / "berth")
    env.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert default._default_state_path() == str(tmp_path / "xdg" / "berth")


def test_root_alone_does_not_make_it_var_lib(env, tmp_path):
    env.setattr("os.geteuid", lambda: 0)
    env.setattr("os.getuid", lambda: 0)
    assert default._default_state_path() == str(tmp_path / "home" / ".local" / "state" / "berth")


@pytest.mark.parametrize("variable", ["INVOCATION_ID", "NOTIFY_SOCKET"])
def test_a_service_of_systemd_uses_var_lib_berth(env, tmp_path, variable):
    env.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    env.setenv(variable, "/run/systemd/notify" if variable == "NOTIFY_SOCKET" else "0123456789abcdef")
    assert default._default_state_path() == "/var/lib/berth"


def test_a_service_of_a_users_systemd_keeps_to_the_users_directory(env, tmp_path):
    env.setenv("INVOCATION_ID", "0123456789abcdef")
    env.setenv("MANAGERPID", "1234")  # set by a user manager only
    assert default._default_state_path() == str(tmp_path / "home" / ".local" / "state" / "berth")


def test_the_sample_and_the_help_document_both_defaults():
    [opt] = [o for o in default.opts if o.name == "state_path"]
    for text in (opt.sample_default, opt.help):
        assert "/var/lib/berth" in text and "$XDG_STATE_HOME/berth" in text
    assert "~/.local/state/berth" in opt.help
