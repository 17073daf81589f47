import pytest

from scheduler.cmd import manage
from scheduler.db import schema


@pytest.fixture
def config_file(tmp_path):
    def write(connection=None):
        lines = ["[DEFAULT]", f"state_path = {tmp_path / 'state'}", "[database]"]
        if connection:
            lines.append(f"connection = {connection}")
        lines += ["max_retries = 0", "retry_interval = 0"]
        path = tmp_path / "berth.conf"
        path.write_text("\n".join(lines) + "\n")
        return str(path)

    return write


def test_db_version_then_sync(config_file, capsys, tmp_path):
    conf = config_file()
    assert manage.main(["--config-file", conf, "db", "version"]) == 0
    assert capsys.readouterr().out.strip() == "none"
    assert manage.main(["--config-file", conf, "db", "sync"]) == 0
    assert capsys.readouterr().out.strip() == schema.head()
    assert (tmp_path / "state" / "berth.sqlite").exists()
    assert manage.main(["--config-file", conf, "db", "sync"]) == 0
    assert capsys.readouterr().out.strip() == schema.head()
    assert manage.main(["--config-file", conf, "db", "version"]) == 0
    assert capsys.readouterr().out.strip() == schema.head()


def test_config_dir(tmp_path, capsys):
    conf_dir = tmp_path / "berth.conf.d"
    conf_dir.mkdir()
    db = tmp_path / "elsewhere" / "x.sqlite"
    (conf_dir / "db.conf").write_text(f"[database]\nconnection = sqlite:///{db}\n")
    assert manage.main(["--config-dir", str(conf_dir), "db", "sync"]) == 0
    assert capsys.readouterr().out.strip() == schema.head()
    assert db.exists()


@pytest.mark.parametrize("url", ["not a url", "nosuchdialect://u:s3cret@h/db"])
def test_bad_url(config_file, capsys, url):
    assert manage.main(["--config-file", config_file(url), "db", "sync"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("berth-manage: ")
    assert "s3cret" not in err[0]


def test_unreachable_database(config_file, capsys):
    conf = config_file("postgresql+psycopg2://berth:s3cret@127.0.0.1:1/berth")
    assert manage.main(["--config-file", conf, "db", "version"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("berth-manage: ")
    assert "unavailable" in err[0] and "s3cret" not in err[0]


def test_missing_command(config_file):
    assert manage.main(["--config-file", config_file()]) == 2
    assert manage.main(["--config-file", config_file(), "db"]) == 2


def test_missing_config_file(capsys, tmp_path):
    assert manage.main(["--config-file", str(tmp_path / "nope.conf"), "db", "sync"]) == 1
    assert "nope.conf" in capsys.readouterr().err


def test_without_a_configuration_file_it_names_the_default_database_it_acts_on(tmp_path, capsys, monkeypatch):
    from scheduler.conf import default

    [state_path] = [o for o in default.opts if o.name == "state_path"]
    monkeypatch.setattr(state_path, "default", str(tmp_path / "state"))  # the user's, in a shell
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.berth/berth.conf
    assert manage.main(["db", "version"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "none"
    assert err.splitlines() == [
        "berth-manage: no configuration file (--config-file, /etc/berth/berth.conf): "
        f"database sqlite:///{tmp_path}/state/berth.sqlite"]


def test_with_a_configuration_file_it_says_nothing_more(config_file, capsys):
    assert manage.main(["--config-file", config_file(), "db", "version"]) == 0
    assert capsys.readouterr().err == ""
