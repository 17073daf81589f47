"""The QMP client against a stand-in monitor on a unix socket."""

import json
import os
import socket
import threading

import pytest

from compute_agent.driver.qemu import qmp


@pytest.fixture(params=[(1, b""), (100, b""), (1, b'{"timestamp": {"seconds": 1}, "event": "STOP"}\n')],
                ids=["short path", "path longer than a socket address", "an event before the greeting"])
def monitor(tmp_path, request):
    """A monitor that greets (after an event left for its previous client, in one case), takes
    qmp_capabilities, sends an event before each answer and answers query-status; anything else
    is an error. Yields the socket's path."""
    length, before = request.param
    directory = tmp_path / ("d" * length)
    directory.mkdir()
    path = str(directory / "qmp.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fd = os.open(directory, os.O_RDONLY)
    try:
        listener.bind(f"/proc/self/fd/{fd}/qmp.sock")
    finally:
        os.close(fd)
    listener.listen()

    def serve():
        conn, _ = listener.accept()
        with conn, conn.makefile("rwb") as stream:
            stream.write(before + b'{"QMP": {"version": {}, "capabilities": []}}\n')
            stream.flush()
            for line in stream:
                command = json.loads(line)["execute"]
                stream.write(b'{"event": "RESUME", "data": {}}\n')
                if command == "qmp_capabilities":
                    stream.write(b'{"return": {}}\n')
                elif command == "query-status":
                    stream.write(b'{"return": {"status": "running", "running": true}}\n')
                else:
                    stream.write(b'{"error": {"class": "CommandNotFound", "desc": "The command '
                                 + command.encode() + b' has not been found"}}\n')
                stream.flush()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path
    listener.close()


def test_status_is_what_query_status_says(monitor):
    assert qmp.status(monitor) == "running"


def test_an_error_says_qemus_words(monitor):
    with qmp.QMP(monitor) as client:
        with pytest.raises(qmp.QMPError, match="nope: CommandNotFound: The command nope"):
            client.execute("nope")


def test_no_socket_is_a_qmp_error(tmp_path):
    with pytest.raises(qmp.QMPError, match="cannot connect to"):
        qmp.status(str(tmp_path / "absent.sock"))

