"""A PostgreSQL cluster of a test's own, which it may stop and start without touching the
server the other tests share."""

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile

import pytest


def _bin_dir():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    if initdb:
        return os.path.dirname(initdb)
    pytest.skip("PostgreSQL's server programs (initdb, pg_ctl) are not installed")


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrivateCluster:
    """initdb'd into a temporary directory, listening on 127.0.0.1 on a free port, trust auth.

    PostgreSQL refuses to run as root: under root the cluster belongs to the
    ``postgres`` user and its programs run as that user.
    """

    def __init__(self, initdb=True):
        """``initdb=False``: an empty data directory, for a copy of another cluster (pg_basebackup)."""
        self.bin = _bin_dir()
        self.port = _free_port()
        self.dir = tempfile.mkdtemp(prefix="berth-pg-")
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "server.log")
        self._as = []
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        if initdb:
            self._run("initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        self.url = f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, program, *args):
        return subprocess.run([*self._as, os.path.join(self.bin, program), *args], check=True,
                              capture_output=True, cwd=self.dir)

    def start(self):
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.dir} "
                   "-c fsync=off")
        self._run("pg_ctl", "-D", self.data, "-l", self.log, "-o", options, "-w", "-t", "60", "start")

    def stop(self):
        """A fast shutdown: open connections are cut, as when a server goes away."""
        self._run("pg_ctl", "-D", self.data, "-m", "fast", "-w", "-t", "60", "stop")

    def destroy(self):
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def private_postgresql():
    """A running PrivateCluster, removed afterwards."""
    cluster = PrivateCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()
