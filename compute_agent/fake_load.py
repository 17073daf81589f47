"""The fake driver's load overrides, set at run time (``berth fake-load``), in memory only.

An override for every instance (``set(load)``) applies to each instance the host holds, now
or later, unless the instance has one of its own (``set(load, uuids)``). Setting the one for
every instance drops the instances' own; clearing without uuids drops them all. Thread-safe:
RPC handlers set them while the reporter reads them. An agent that restarts starts without.
"""

import threading


class LoadOverrides:
    def __init__(self):
        self._lock = threading.Lock()
        self._every = None  # a Load for every instance, or None
        self._own = {}  # uuid -> Load

    def set(self, load, uuids=None):
        """``load`` for the instances ``uuids``, or for every instance when None."""
        with self._lock:
            if uuids is None:
                self._every = load
                self._own.clear()
            else:
                self._own.update(dict.fromkeys(uuids, load))

    def clear(self, uuids=None):
        """Drop the overrides of ``uuids``, or every override when None; how many went."""
        with self._lock:
            if uuids is None:
                dropped = len(self._own) + (self._every is not None)
                self._every = None
                self._own.clear()
                return dropped
            return sum(self._own.pop(uuid, None) is not None for uuid in uuids)

    def forget(self, uuid):
        """The instance is gone from the host."""
        with self._lock:
            self._own.pop(uuid, None)

    def for_instances(self, uuids):
        """{uuid: Load} of those of ``uuids`` under an override."""
        with self._lock:
            if self._every is None:
                return {uuid: self._own[uuid] for uuid in uuids if uuid in self._own}
            return {uuid: self._own.get(uuid, self._every) for uuid in uuids}

    def state(self):
        """``{"every": {cpu, memory} or None, "instances": {uuid: {cpu, memory}}}``."""
        with self._lock:
            return {"every": None if self._every is None else self._every.as_dict(),
                    "instances": {uuid: load.as_dict() for uuid, load in sorted(self._own.items())}}
