"""AvailabilityZoneFilter: the host must be in the availability zone the request asks for.

A host's zones are those of the aggregates it belongs to; a host in no
zoned aggregate is in ``[filter_scheduler] default_availability_zone``.
The zone comes from ``instance_properties.availability_zone``, or from the
``availability_zone`` scheduler hint (the scheduler copies it before selection).
"""

from oslo_config import cfg

from scheduler.policy import aggregates, filters

opts = [
    cfg.StrOpt(
        "default_availability_zone",
        default="nova",
        help="AvailabilityZoneFilter: the availability zone of hosts that are in no "
        "aggregate with a zone.",
    ),
]


def list_opts():
    return [("filter_scheduler", opts)]


def requested_zone(spec):
    return spec.availability_zone or spec.scheduler_hints.get("availability_zone") or None


class AvailabilityZoneFilter(filters.BaseHostFilter):
    run_filter_once_per_request = True
    reads_hints = ("availability_zone",)

    def __init__(self, conf):
        super().__init__(conf)
        self.default_zone = conf.filter_scheduler.default_availability_zone

    def host_passes(self, host_state, spec):
        zone = requested_zone(spec)
        if not zone:
            return True
        return str(zone) in aggregates.zones_of_row(host_state.table, host_state.row, self.default_zone)

    def filter_vector(self, table, rows, spec):
        zone = requested_zone(spec)
        if not zone:
            return True
        return aggregates.zone_mask(table, rows, str(zone), self.default_zone)

    def why_removed(self, table, rows, spec):
        """When the zone asked for is none of the hosts of ``rows``: the zones they are in (when
        some are in it, the count of hosts removed says enough)."""
        zone = requested_zone(spec)
        if not zone:
            return None
        of_rows = [{z for a in found for z in a.zones} or {self.default_zone}
                   for found, _ in aggregates.memberships(table, rows)]
        if any(str(zone) in zones for zones in of_rows):
            return None
        known = ", ".join(sorted(set().union(*of_rows)))
        return f"no host is in availability zone {zone} (the hosts are in {known})"
