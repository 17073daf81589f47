"""What a compute driver provides to the agent."""

import threading

from compute_agent.driver.capabilities import Capabilities


class BuildAborted(Exception):
    """The agent is stopping; the build resumes when it starts again."""


class CannotStart(Exception):
    """The driver cannot run as configured here; its message says why and what to change. The
    agent says it in one line and does not start."""


class BuildFailed(Exception):
    """A build the driver failed for a reason its message says whole: logged in one line, without
    the traceback an unexpected error gets; the agent reschedules it as any failed build."""


class MoveFailed(Exception):
    """A move the driver failed for a reason its message says whole: logged in one line, without
    the traceback an unexpected error gets."""


class ComputeDriver:
    """Totals of the host, and building and destroying instances.

    ``instance`` is the record the scheduler sent: ``{"uuid", "flavor",
    "project_id"}``. What builds it (``spawn``, and a move's destination steps ``prepare_move_in``
    and ``finish_move_in``) gets its request's image too: ``"image": {"id", "properties"}``
    (``id`` missing when the request names none). ``spawn`` raises on a failed build (the agent
    frees the claim and reschedules) and ``BuildAborted`` when :meth:`stop` interrupts it.
    """

    name = "base"
    hypervisor_type = "base"
    #: What it can do besides building and destroying; the agent refuses the rest.
    capabilities = Capabilities()

    def __init__(self, conf):
        self.conf = conf
        self._stopping = threading.Event()

    def get_totals(self):
        """``{"memory_mb", "local_gb", "vcpus"}`` of the whole host."""
        raise NotImplementedError

    def describe(self):
        """Which driver this is and the totals it reports, in one line for the log at start."""
        totals = self.get_totals()
        return (f"driver {self.name}: {totals['memory_mb']} MB memory, {totals['local_gb']} GB disk, "
                f"{totals['vcpus']} vCPUs")

    def get_facts(self):
        """What the host is, as Nova's compute node says it, read by the driver alone (the agent
        adds nothing): ``{"hypervisor_type", "cpu_arch" (Nova's name: x86_64, aarch64...),
        "vm_modes" (a list), "cpu_info" (a dict), "hypervisor_version" (an int, 1.2.3 as 1002003),
        "host_ip"}``; any but hypervisor_type may be missing."""
        return {"hypervisor_type": self.hypervisor_type}

    def get_traits(self):
        """The host's traits the driver reads from it (its CPU's HW_CPU_X86_* ones)."""
        return []

    def cpu_ids(self):
        """The ids of the host's CPUs (what cpu_dedicated_set may name)."""
        return range(self.get_totals()["vcpus"])

    def spawn(self, instance):
        raise NotImplementedError

    def attach(self, instances):
        """The agent starts holding ``instances`` (uuids of the ones it has built): take their guests
        back; return {uuid: reason} of those whose guest is gone, which the agent reports in ERROR
        with that reason. Nothing to take back by default."""
        return {}

    def lost(self, instances):
        """{uuid: reason} of the guests of ``instances`` (uuids of ACTIVE ones) that are gone or
        ended while the agent runs, which it reports in ERROR with that reason; asked before
        each periodic report. None by default."""
        return {}

    def shut_down(self, instances):
        """{uuid: why} of the guests of ``instances`` (uuids of ACTIVE ones) that powered themselves
        off (their own poweroff, not a stop the agent asked for), having ended what they left
        running; the agent records them SHUTOFF, their claim kept. Asked before each periodic report,
        after lost(). None by default."""
        return {}

    def destroy(self, instance):
        raise NotImplementedError

    # A move between two agents (compute API 2.0), each step run by the agent it names, in a
    # worker thread; the scheduler records each and tells the next. ``migration``: {"id",
    # "kind", "source_host", "dest_host", "live", "old_flavor"}; ``instance`` as the agent
    # running the step holds it (on the destination, at its new flavor). Each raises on a
    # failure (MoveFailed: one the message says whole), having left its host as before the
    # step, and BuildAborted when stop() interrupts it: the agent runs it again when it
    # starts, so that a step must carry on (or begin again) from whatever it left.

    def prepare_move_in(self, instance, migration):
        """Destination, first: make ready to take ``instance`` in (its disk, a process waiting for
        the incoming instance, a port); return what the source needs to hand it over (a dict of
        JSON values, the transfer). The agent has claimed its resources already."""
        return {}

    def migrate_out(self, instance, migration, transfer):
        """Source, second: hand ``instance`` over through ``transfer``: live, while it runs (it
        stops here once the destination has it); cold, powered off, its disk handed over. What it
        measured of a live migration, told the scheduler: {"downtime_ms", "total_ms", "memory_bytes"}
        (scheduler.db.moves.FIGURES, whole numbers, any of them), or None."""
        raise MoveFailed(f"the {self.name} driver cannot move an instance to another host")

    def finish_move_in(self, instance, migration, transfer):
        """Destination, last: run ``instance`` here (resume it, or boot it from its disk)."""
        raise MoveFailed(f"the {self.name} driver cannot take an instance in from another host")

    def abort_move_out(self, instance, migration):
        """Source, after a move that failed once migrate_out had begun, or a resize reverted: run
        ``instance`` here again as before the move. Nothing to do by default."""

    def migrate_in(self, instance, migration):
        """Take over ``instance`` (its flavor: the one it has here) from ``migration["source_host"]``
        alone: a move of compute API 1.x, from a scheduler capped below 2.0 while agents of an
        older release run (``migration``: {"id", "kind", "source_host", "live", "old_flavor"}).
        By default the destination's two steps, for drivers whose source has nothing to hand
        over. Raises as the steps."""
        self.finish_move_in(instance, migration, self.prepare_move_in(instance, migration))

    def resize(self, instance, migration):
        """Give ``instance`` its new flavor (``instance["flavor"]``) on this host; raises as migrate_in."""
        raise NotImplementedError

    # An instance's power (Capabilities.power_control), each run in a worker thread of the agent once
    # it has recorded the action; each raises on a failure (the instance goes to ERROR with the
    # reason) and BuildAborted when stop() interrupts it (run again when the agent starts: it must
    # carry on from whatever it left, e.g. an instance off already).

    def power_off(self, instance):
        """Power ``instance`` off (a guest asked to shut down, then forced); its resources stay
        reserved here: the agent keeps its claim."""
        raise NotImplementedError

    def power_on(self, instance):
        """Power ``instance`` on again, as it was before it was powered off."""
        raise NotImplementedError

    def reboot(self, instance, hard=False):
        """Reboot ``instance``: ask its guest (soft), or reset it (``hard``)."""
        raise NotImplementedError

    def restore_power_state(self, instance, powered_on):
        """At the agent's start: ``instance`` is on (``powered_on``) or off as the agent's records say
        (SHUTOFF: off); keep it so. Nothing by default."""

    def console_output(self, instance, lines=None):
        """The last ``lines`` lines (all with None) of ``instance``'s serial console, oldest first; None
        when the driver keeps no console."""
        return None

    def stop(self):
        """Interrupt builds in progress; the agent is shutting down."""
        self._stopping.set()

    def _wait(self, seconds):
        """Sleep ``seconds`` unless stopped first (then raise BuildAborted)."""
        if self._stopping.wait(seconds) if seconds > 0 else self._stopping.is_set():
            raise BuildAborted()
