"""The agent's instances, kept across a restart.

One JSON file per agent, ``<state_path>/compute/<host>/instances.json``:
``{uuid: {"instance", "state", "request_spec", "filter_properties"}}``,
rewritten atomically (temporary file, fsync, os.replace, fsync of the
directory) on every change, so that a crash leaves either the old or the new
file, never a torn one.
"""

import copy
import fcntl
import json
import logging
import os
import socket
import tempfile
import threading

LOG = logging.getLogger(__name__)


class InstanceStoreError(Exception):
    pass


class HostTaken(InstanceStoreError):
    """Another agent process holds this host's instance records."""


def store_path(state_path, host):
    safe = host.replace(os.sep, "_").replace("\0", "_") or "_"
    return os.path.join(state_path, "compute", safe, "instances.json")


class InstanceStore:
    def __init__(self, state_path, host):
        self.host = host
        self.path = store_path(state_path, host)
        self._lock = threading.Lock()
        self._records = {}
        self._owner = None  # the open lock file while this process serves the host

    def acquire(self):
        """Take the host's records for this process, or raise HostTaken naming the
        process that has them: two agents for one host would each hold half of its
        instances. The lock goes when the process does (or ``release()``)."""
        directory = os.path.dirname(self.path)
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, "agent.lock")
        owner = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (held as long as we serve)
        try:
            fcntl.flock(owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner.seek(0)
            holder = owner.read().strip() or "another process"
            owner.close()
            raise HostTaken(f"host {self.host} is served already by {holder}, which holds {path}; "
                            "stop that agent, or give this one another [DEFAULT] host") from None
        owner.seek(0)
        owner.truncate()
        owner.write(f"the agent with pid {os.getpid()} on {socket.gethostname()}")
        owner.flush()
        self._owner = owner

    def release(self):
        if self._owner is not None:
            self._owner.close()  # closing the last descriptor drops the lock
            self._owner = None

    def load(self):
        """Read the file (missing = no instances); returns a copy of the records."""
        with self._lock:
            try:
                with open(self.path, encoding="utf-8") as f:
                    records = json.load(f)
            except FileNotFoundError:
                records = {}
            except (OSError, ValueError) as exc:
                raise InstanceStoreError(
                    f"cannot read the agent's instance records {self.path}: {exc}; "
                    "fix or remove the file (removing it forgets those instances)"
                ) from exc
            if not isinstance(records, dict):
                raise InstanceStoreError(f"{self.path} does not hold a JSON object")
            self._records = records
            return copy.deepcopy(records)

    def get(self, uuid):
        with self._lock:
            record = self._records.get(uuid)
            return copy.deepcopy(record) if record is not None else None

    def __contains__(self, uuid):
        with self._lock:
            return uuid in self._records

    def records(self):
        with self._lock:
            return copy.deepcopy(self._records)

    def select(self, pick):
        """{uuid: pick(record)} of the records for which ``pick`` (which must not change them)
        answers something other than None; read in place, without a copy of every record."""
        with self._lock:
            return {uuid: found for uuid, record in self._records.items()
                    if (found := pick(record)) is not None}

    def put(self, uuid, record):
        with self._lock:
            self._change(uuid, copy.deepcopy(record))

    def set_state(self, uuid, state):
        with self._lock:
            if uuid not in self._records:
                return False
            self._change(uuid, dict(self._records[uuid], state=state))
            return True

    def delete(self, uuid):
        with self._lock:
            if uuid not in self._records:
                return False
            self._change(uuid, None)
            return True

    def _change(self, uuid, record):
        """Set (or with None remove) one record and write; memory unchanged if writing fails."""
        before = self._records.get(uuid)
        if record is None:
            del self._records[uuid]
        else:
            self._records[uuid] = record
        try:
            self._write()
        except BaseException:
            if before is None:
                self._records.pop(uuid, None)
            else:
                self._records[uuid] = before
            raise

    def _write(self):
        directory = os.path.dirname(self.path)
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".instances.", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self._records, f, sort_keys=True, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        try:
            dir_fd = os.open(directory, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dir_fd)
        except OSError:
            pass
        finally:
            os.close(dir_fd)
