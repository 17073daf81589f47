"""CPU seconds of the processes an end-to-end run involves, read from /proc.

Each figure is a process' utime + stime (its threads included); a process that is
gone when read counts 0, so a window's figure is taken over the processes alive at
both ends.
"""

import os

import sqlalchemy as sa

_TICK = os.sysconf("SC_CLK_TCK")


def seconds(pid):
    """utime + stime of ``pid`` in seconds, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def listening(port):
    """The pids of the processes listening on TCP ``port`` (a broker's, whatever else
    runs on the machine: its command-line tools' short-lived processes are not counted)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] == "0A" and int(fields[1].rpartition(":")[2], 16) == port:
                        inodes.add(f"socket:[{fields[9]}]")
        except OSError:
            continue
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
            if any(os.readlink(f"/proc/{entry}/fd/{fd}") in inodes for fd in fds):
                pids.append(int(entry))
        except OSError:
            continue
    return pids


def postgres_pids(engine, database):
    """The server processes working for ``database`` alone: its backends, autovacuum's
    included. The server's shared ones (WAL writer, checkpointer...) are left out: every
    database's commits keep them busy."""
    with engine.connect() as db:
        return [pid for (pid,) in db.execute(sa.text(
            "SELECT pid FROM pg_stat_activity WHERE datname = :db"), {"db": database})]


class Window:
    """CPU seconds of named groups of pids between ``start()`` and ``stop()``."""

    def __init__(self):
        self._start = {}
        self.groups = {}  # name -> [pid]

    def start(self, groups):
        self.groups = {name: list(pids) for name, pids in groups.items()}
        self._start = {pid: seconds(pid) for pids in self.groups.values() for pid in pids}

    def stop(self, more=None):
        """{group: CPU seconds used since start()}; ``more`` adds pids seen since (counted
        from 0 if they were not there at the start, as a backend opened meanwhile)."""
        for name, pids in (more or {}).items():
            known = self.groups.setdefault(name, [])
            for pid in pids:
                if pid not in known:
                    known.append(pid)
                    self._start.setdefault(pid, 0.0)
        used = {}
        for name, pids in self.groups.items():
            total = 0.0
            for pid in pids:
                end, begin = seconds(pid), self._start.get(pid)
                if end is not None and begin is not None:
                    total += end - begin
            used[name] = total
        return used
