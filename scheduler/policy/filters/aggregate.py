"""Filters that read host aggregates' metadata.

- AggregateInstanceExtraSpecsFilter: every flavor extra_spec that is
  unscoped or scoped ``aggregate_instance_extra_specs:`` must be matched
  (extra_specs_ops) by one of the values of the same key in the host's
  aggregates, each value split on commas (``gpu=2,4`` offers 2 and 4), as Nova does.
- AggregateMultiTenancyIsolation: a host in an aggregate with
  ``filter_tenant_id`` metadata (comma-separated project ids; also any key
  starting with ``filter_tenant_id``) takes only those projects' instances.
- AggregateRamFilter / AggregateCoreFilter / AggregateDiskFilter: RamFilter,
  CoreFilter and DiskFilter with the allocation ratio taken from the host's
  aggregates' ``ram_allocation_ratio`` / ``cpu_allocation_ratio`` /
  ``disk_allocation_ratio`` metadata (the smallest, as Nova does), falling
  back to the ``[filter_scheduler]`` ratio when none is set or one is not a
  number. They check the flavor's amounts with Placement's arithmetic, as those filters do
  (scheduler.policy.filters.resources), and AggregateCoreFilter refuses a host that reports
  no vCPUs, as CoreFilter does (Nova's passed it). ``limits()`` gives the agent the limit
  under the ratio actually used.
"""

import numpy as np

from scheduler.policy import aggregates, filters
from scheduler.policy.filters import extra_specs_ops, resources

EXTRA_SPECS_SCOPE = "aggregate_instance_extra_specs"
TENANT_KEY = "filter_tenant_id"


def _scoped_specs(extra_specs, scope):
    """[(key without scope, requirement)] of the unscoped keys and those of ``scope``."""
    wanted = []
    for key, req in extra_specs.items():
        parts = key.split(":", 1)
        if len(parts) > 1:
            if parts[0] != scope:
                continue
            key = parts[1]
        wanted.append((key, req))
    return wanted


class AggregateInstanceExtraSpecsFilter(filters.BaseHostFilter):
    run_filter_once_per_request = True
    reads_extra_specs = ("", EXTRA_SPECS_SCOPE + ":")

    def check_hints(self, spec):
        for key, req in _scoped_specs(spec.flavor.extra_specs, EXTRA_SPECS_SCOPE):
            try:
                extra_specs_ops.check(req)
            except ValueError as exc:
                raise ValueError(f"flavor extra spec {key[:60]}: {exc}") from None

    def host_passes(self, host_state, spec):
        specs = _scoped_specs(spec.flavor.extra_specs, EXTRA_SPECS_SCOPE)
        if not specs:
            return True
        host_aggregates = host_state.aggregates
        for key, req in specs:
            values = {piece for value in aggregates.metadata_values(host_aggregates, key)
                      for piece in aggregates.pieces(value)}
            if not values or not any(extra_specs_ops.match(v, req) for v in values):
                return False
        return True

    def filter_vector(self, table, rows, spec):
        specs = _scoped_specs(spec.flavor.extra_specs, EXTRA_SPECS_SCOPE)
        if not specs:
            return True

        def matches(aggregate, key, req):
            value = aggregate.metadata.get(key)
            return value is not None and any(extra_specs_ops.match(v, req) for v in aggregates.pieces(value))

        def compute(index):
            passed = np.ones(table.size, dtype=bool)
            for key, req in specs:
                passed &= index.rows_in(a for a in index.aggregates if matches(a, key, req))
            return passed

        key = ("extra_specs", tuple((k, str(r)) for k, r in specs))
        return aggregates.cached_rows(table, rows, key, compute)

    def why_removed(self, table, rows, spec):
        """Each extra spec some hosts of ``rows`` do not match: on how many, and the values their
        aggregates' metadata give the key (or that none gives it)."""
        notes = []
        groups = None
        for key, req in _scoped_specs(spec.flavor.extra_specs, EXTRA_SPECS_SCOPE):
            if groups is None:
                groups = aggregates.memberships(table, rows)
            missed, offered = 0, set()
            for found, count in groups:
                given = aggregates.metadata_values(found, key)
                values = {piece for value in given for piece in aggregates.pieces(value)}
                if not any(extra_specs_ops.match(v, req) for v in values):
                    missed += count
                    offered |= values
            if missed:
                has = (f"their aggregates give {key}={','.join(sorted(offered))}" if offered
                       else f"no aggregate of theirs sets {key}")
                which = ("matches the aggregate metadata of no host" if missed == len(rows) else
                         f"does not match the aggregate metadata of {missed} of {len(rows)} hosts")
                notes.append(f"flavor extra spec {key}={req} {which} ({has})")
        return "; ".join(notes) or None


def _tenants(aggregate):
    found = set()
    for key, value in aggregate.metadata.items():
        if key.startswith(TENANT_KEY):
            found.update(aggregates.pieces(value))
    return found


def _isolating(aggregate):
    return any(key.startswith(TENANT_KEY) for key in aggregate.metadata)


class AggregateMultiTenancyIsolation(filters.BaseHostFilter):
    run_filter_once_per_request = True

    def host_passes(self, host_state, spec):
        isolating = [a for a in host_state.aggregates if _isolating(a)]
        if not isolating:
            return True
        return spec.project_id in set().union(*(_tenants(a) for a in isolating))

    def filter_vector(self, table, rows, spec):
        return aggregates.admitted_rows(table, rows, ("tenant", spec.project_id), _isolating,
                                        lambda a: spec.project_id in _tenants(a))


class _AggregateRatio:
    """The allocation ratio of a host: its aggregates' ``key`` metadata (the smallest), or the option."""

    key = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.aggregate_numbers = {cls.key: 0.0}

    def ratio_of(self, host_state):
        values = aggregates.metadata_values(host_state.aggregates, self.key)
        return aggregates.min_number(values, self.ratio)

    def ratios_of(self, table, rows):
        return aggregates.min_number_vector(table, rows, self.key, self.ratio)

    def kept_vector(self, table, rows):
        return self.kept(getattr(table, self.reserve)[rows], self.ratios_of(table, rows))


class AggregateRamFilter(_AggregateRatio, resources.RamFilter):
    key = "ram_allocation_ratio"


class AggregateDiskFilter(_AggregateRatio, resources.DiskFilter):
    key = "disk_allocation_ratio"


class AggregateCoreFilter(_AggregateRatio, resources.CoreFilter):
    """A host that reports no vCPUs takes none, as CoreFilter has it (Nova's passed it)."""

    key = "cpu_allocation_ratio"
