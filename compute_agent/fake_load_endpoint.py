"""The fake driver's load over RPC (``berth fake-load``): set_fake_load and clear_fake_load of
the compute API, kept out of its production endpoint (compute_agent.manager.ComputeEndpoint).

Every agent serves them on ``compute.<host>`` beside that endpoint, as the released versions of
the API (1.0 on) say: an agent of the fake driver sets its load, one of another driver refuses,
saying which driver it runs. The arguments are checked first (InvalidRequest), either way.
"""

import logging

from compute_agent import validate
from compute_agent.driver.fake import FakeDriver
from compute_agent.load_model import Load
from scheduler import api_versions, rpc
from scheduler.exception import InvalidRequest

LOG = logging.getLogger(__name__)


class FakeLoadEndpoint:
    """Calls, whose answer is the overrides in force: ``{host, every, instances, held}``
    (``every``: the one for every instance; ``held``: how many instances the host holds)."""

    RPC_API = api_versions.COMPUTE.at("1.2")

    def __init__(self, host, driver, tracker, report_changed):
        """``report_changed()``: have the scheduler see the new load at once, not at the next
        periodic report."""
        self._host = host
        self._driver = driver
        self._tracker = tracker
        self._report_changed = report_changed

    @rpc.callers(rpc.OPERATOR)
    def set_fake_load(self, context, cpu, memory=None, instance_uuids=None):
        """Simulate ``cpu`` (and ``memory``) of each instance's flavor in use, on the instances
        ``instance_uuids`` or every one (None); returns the overrides in force."""
        cpu, memory, uuids = validate.fake_load_args(cpu, memory, instance_uuids)
        overrides = self._overrides("set_fake_load")
        if uuids is not None:
            missing = [uuid for uuid in uuids if uuid not in self._tracker]
            if missing:
                raise InvalidRequest(f"set_fake_load: host {self._host} holds no instance "
                                     f"{', '.join(missing[:10])}{', ...' if len(missing) > 10 else ''}; "
                                     "nothing set")
        overrides.set(Load(cpu, memory), uuids)
        LOG.info("Fake load set on %s: cpu %g, memory %s, for %s", self._host, cpu,
                 "as modelled" if memory is None else f"{memory:g}",
                 "every instance" if uuids is None else ", ".join(uuids))
        self._report_changed()
        return self._state(overrides)

    @rpc.callers(rpc.OPERATOR)
    def clear_fake_load(self, context, instance_uuids=None):
        """Back to the busy/idle model for ``instance_uuids``, or all; returns the overrides left."""
        uuids = validate.instance_uuids(instance_uuids, "clear_fake_load")
        overrides = self._overrides("clear_fake_load")
        dropped = overrides.clear(uuids)
        LOG.info("Fake load cleared on %s for %s (%d override(s))", self._host,
                 "every instance" if uuids is None else ", ".join(uuids), dropped)
        self._report_changed()
        return self._state(overrides)

    def _overrides(self, method):
        if not isinstance(self._driver, FakeDriver):
            raise InvalidRequest(f"{method}: host {self._host} runs the {self._driver.name} driver, which "
                                 "simulates no load; only [compute_agent] driver = fake does")
        return self._driver.fake_load

    def _state(self, overrides):
        return dict(overrides.state(), host=self._host, held=len(self._tracker.instance_uuids()))
