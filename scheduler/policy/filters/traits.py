"""TraitsFilter: the host has every trait the request requires (its flavor's ``trait:NAME=required``
and its image's) and none its flavor forbids (``trait:NAME=forbidden``), as Placement filters
on traits. The traits are those the host's agent last reported."""

from berth_contract.traits import TRAIT
from scheduler.policy import filters


class TraitsFilter(filters.BaseHostFilter):
    run_filter_once_per_request = True
    reads_extra_specs = (TRAIT,)
    reads_image_properties = (TRAIT,)

    def host_passes(self, host_state, spec):
        have = host_state.traits
        return spec.required_traits <= have and not (spec.forbidden_traits & have)

    def filter_vector(self, table, rows, spec):
        required, forbidden = spec.required_traits, spec.forbidden_traits
        if not required and not forbidden:
            return True
        passed = True
        for name in required:
            column = table.trait_column(name)
            if column is None:
                return False
            passed = passed & column[rows]
        for name in forbidden:
            column = table.trait_column(name)
            if column is not None:
                passed = passed & ~column[rows]
        return passed

    def why_removed(self, table, rows, spec):
        """The traits that decided: each required one the hosts of ``rows`` lack, each forbidden one
        they have, with how many of them (no host / every host when it is all of them)."""
        count = len(rows)
        notes = []
        for name in sorted(spec.required_traits):
            column = table.trait_column(name)
            lacking = count if column is None else count - int(column[rows].sum())
            if lacking:
                notes.append(f"required trait {name} is on no host" if lacking == count
                             else f"required trait {name} is missing on {lacking} of {count} hosts")
        for name in sorted(spec.forbidden_traits):
            column = table.trait_column(name)
            having = 0 if column is None else int(column[rows].sum())
            if having:
                notes.append(f"forbidden trait {name} is on every host" if having == count
                             else f"forbidden trait {name} is on {having} of {count} hosts")
        return "; ".join(notes) or None
