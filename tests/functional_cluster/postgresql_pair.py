"""A private PostgreSQL primary and a streaming standby of it, on two free ports, for a test
to fail over: stop the primary as a crash would, promote the standby.

Replication is synchronous (synchronous_standby_names = '*') unless asked otherwise: a commit
the primary acknowledged is on the standby, as an operator who fails over without losing
commits runs it.
"""

import contextlib
import subprocess
import time

import psycopg2

from tests.functional.private_postgresql import PrivateCluster


def _dsn(cluster, dbname="postgres"):
    return f"host=127.0.0.1 port={cluster.port} user=postgres dbname={dbname} connect_timeout=5"


def query(cluster, sql, *params):
    """The first row of ``sql`` on ``cluster`` (autocommit)."""
    with contextlib.closing(psycopg2.connect(_dsn(cluster))) as connection:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone() if cursor.description else None


class PostgresqlPair:
    """``primary`` and ``standby`` (PrivateCluster each), the standby streaming from the primary."""

    def __init__(self, database="berth", synchronous=True):
        self.database = database
        self.synchronous = synchronous
        self.primary = PrivateCluster()
        self.standby = PrivateCluster(initdb=False)

    @property
    def url(self):
        """One libpq URL naming both servers; it connects to whichever takes writes."""
        hosts = "&".join(f"host=127.0.0.1:{c.port}" for c in (self.primary, self.standby))
        return f"postgresql+psycopg2://postgres@/{self.database}?{hosts}&target_session_attrs=read-write"

    def start(self, timeout=60):
        self.primary.start()
        query(self.primary, f'CREATE DATABASE "{self.database}"')
        self.primary._run("pg_basebackup", "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", "postgres",
                          "-D", self.standby.data, "-R", "-X", "stream", "--checkpoint=fast", "--no-sync")
        self.standby.start()
        self.wait_streaming(timeout)
        if not self.synchronous:
            return
        query(self.primary, "ALTER SYSTEM SET synchronous_standby_names = '*'")
        query(self.primary, "SELECT pg_reload_conf()")
        self.wait_streaming(timeout, sync_state="sync")

    def wait_streaming(self, timeout=60, sync_state=None):
        deadline = time.monotonic() + timeout
        while True:
            row = query(self.primary, "SELECT state, sync_state FROM pg_stat_replication")
            if row and row[0] == "streaming" and sync_state in (None, row[1]):
                return row
            if time.monotonic() > deadline:
                raise AssertionError(f"the standby on port {self.standby.port} is not streaming "
                                     f"{sync_state or ''} after {timeout} s: {row}")
            time.sleep(0.1)

    def wait_replayed(self, timeout=60):
        """Wait until the standby has replayed everything the primary wrote so far."""
        written = query(self.primary, "SELECT pg_current_wal_lsn()")[0]
        deadline = time.monotonic() + timeout
        while query(self.standby, "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", written)[0] is not True:
            if time.monotonic() > deadline:
                raise AssertionError(f"the standby has not replayed up to {written} after {timeout} s")
            time.sleep(0.05)

    def in_recovery(self, cluster):
        return query(cluster, "SELECT pg_is_in_recovery()")[0]

    def crash_primary(self):
        """Stop the primary as a crash would: no shutdown checkpoint, connections cut."""
        self.primary._run("pg_ctl", "-D", self.primary.data, "-m", "immediate", "-w", "-t", "60", "stop")

    def promote_standby(self):
        """Make the standby a primary; returns once it takes writes."""
        self.standby._run("pg_ctl", "-D", self.standby.data, "-w", "-t", "60", "promote")

    def destroy(self):
        for cluster in (self.standby, self.primary):
            with contextlib.suppress(subprocess.CalledProcessError):
                cluster.destroy()


@contextlib.contextmanager
def postgresql_pair(database="berth", synchronous=True):
    """A started PostgresqlPair, removed afterwards."""
    pair = PostgresqlPair(database, synchronous)
    try:
        pair.start()
        yield pair
    finally:
        pair.destroy()
