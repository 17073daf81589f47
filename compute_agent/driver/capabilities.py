"""What a compute driver can do, declared on its class (as Nova's ``ComputeDriver.capabilities``):
the agent reads it instead of probing the driver, and refuses what the driver cannot do."""

from dataclasses import dataclass

from berth_contract import traits


@dataclass(frozen=True)
class Capabilities:
    #: It takes an instance in while it runs (a migration whose ``live`` is true).
    live_migration: bool = False
    #: Its instances' disks are on storage the other hosts share: a move copies no disk.
    shared_storage: bool = False
    #: It gives an instance a new flavor on the host it runs on (a resize in place); its agent reports
    #: the trait berth_contract.traits.RESIZE_IN_PLACE, without which a scheduler resizes elsewhere.
    resize_in_place: bool = False
    #: It measures its instances' use and its host's load, which the reports carry: it has
    #: ``measure(instances, now=None)``, the figures of the host and of ``instances`` (uuids)
    #: as compute_agent.load_model gives them, ``instance_usage`` among them.
    measures_usage: bool = False
    #: It powers its instances off and on and reboots them (``power_off``, ``power_on``, ``reboot``);
    #: its agent reports the trait berth_contract.traits.POWER_CONTROL, which the schedulers read.
    power_control: bool = False

    def traits(self) -> list[str]:
        """The traits the agent reports for what its driver can do (Nova's capability traits)."""
        return ([traits.POWER_CONTROL] if self.power_control else []) + \
            ([traits.RESIZE_IN_PLACE] if self.resize_in_place else [])
