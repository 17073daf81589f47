"""The port an incoming live migration listens on."""

import socket

import pytest

from compute_agent.driver.qemu import ports


def _listening():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_a_port_something_listens_on_or_a_migration_waits_for_is_passed_over():
    with _listening() as busy:
        port = busy.getsockname()[1]
        found = ports.free_port("127.0.0.1", port, port + 50, taken={port + 1})
    assert port + 1 < found <= port + 50


def test_a_range_with_no_free_port_says_which_options_to_widen():
    with _listening() as busy:
        port = busy.getsockname()[1]
        with pytest.raises(ports.NoFreePort, match=f"no free port on 127.0.0.1 among {port}-{port}"):
            ports.free_port("127.0.0.1", port, port)
