"""On filesystem:// (the embedded default), what ``berth`` sends before the scheduler has ever
started waits in its queue: the scheduler handles it once it is up."""

import threading

import pytest

from tests.unit.cli_scheduler import cli_scheduler, main, write_conf

WAIT = 30


@pytest.fixture
def conf_file(tmp_path):
    path = write_conf(tmp_path)
    path.write_text(path.read_text().replace("transport_url = memory://", "transport_url = filesystem://"))
    return path


def no_endpoints(conf, database, manager):
    return []


def test_a_boot_sent_before_the_scheduler_ever_started_is_handled_once_it_is(conf_file):
    status, out = main(conf_file, "boot", "--flavor-ram", "64", "--flavor-vcpus", "1", "--name", "early")
    assert status == 0
    [uuid] = out.split()

    with cli_scheduler(conf_file, no_endpoints):
        status, out = main(conf_file, "show", uuid, "-f", "value", "-c", "name")
    assert (status, out) == (0, "early\n")


def test_a_listing_asked_before_the_scheduler_ever_started_is_answered_once_it_is(conf_file, capsys):
    done = []
    asking = threading.Thread(target=lambda: done.append(main(conf_file, "instances")))
    asking.start()
    asking.join(1)  # the request is sent, and nothing has declared the scheduler's queue yet
    assert asking.is_alive()

    with cli_scheduler(conf_file, no_endpoints):
        asking.join(WAIT)
    assert not asking.is_alive()
    [(status, out)] = done
    assert status == 0 and out.split()[:2] == ["UUID", "STATE"]


def test_a_timeout_says_the_request_expired_with_it(conf_file, capsys):
    text = conf_file.read_text()
    conf_file.write_text(text.replace("rpc_response_timeout = 10", "rpc_response_timeout = 1"))
    assert main(conf_file, "instances") == (1, "")
    assert capsys.readouterr().err.splitlines()[-1] == (
        "berth: the scheduler did not answer within 1 s: is berth-scheduler (or berth-all-in-one) running "
        "on filesystem://? The request expired with the wait: a scheduler that starts later drops it, unrun")
