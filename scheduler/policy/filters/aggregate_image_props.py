"""AggregateImagePropertiesIsolation: aggregate metadata the image's properties must match.

For every metadata key of the host's aggregates (with
``aggregate_image_properties_isolation_namespace`` set, only the keys
starting with the namespace and the separator), an image that has a
property of that name must have one of the values the host's aggregates
give the key (each value split on commas, spaces around each piece ignored;
the values of all the host's aggregates count). As Nova's: an image without
the property, or with an empty, zero or false value (``""``, ``0``, JSON
``false``, ``[]``), passes; a value is compared as Python's ``str()`` of it
(JSON ``true`` is ``True``, ``2`` is ``2``, ``1.0`` is ``1.0``).

Berth compares the image properties the request carries, by their name in
the request; Nova 34 reads only the standard image properties (its
ImageMetaProps fields, legacy names mapped and values coerced to their type)
and skips any other key.
"""

from oslo_config import cfg

from scheduler.policy import aggregates, filters

opts = [
    cfg.StrOpt(
        "aggregate_image_properties_isolation_namespace",
        help="AggregateImagePropertiesIsolation: only aggregate metadata keys starting with "
        "this namespace (and the separator) are matched against the image's properties; "
        "unset: every key is.",
    ),
    cfg.StrOpt(
        "aggregate_image_properties_isolation_separator",
        default=".",
        help="AggregateImagePropertiesIsolation: what separates the namespace from the rest "
        "of a metadata key.",
    ),
]


def list_opts():
    return [("filter_scheduler", opts)]


class AggregateImagePropertiesIsolation(filters.BaseHostFilter):
    run_filter_once_per_request = True
    reads_image_properties = ("*",)

    def __init__(self, conf):
        super().__init__(conf)
        options = conf.filter_scheduler
        namespace = options.aggregate_image_properties_isolation_namespace
        separator = options.aggregate_image_properties_isolation_separator or ""
        self.prefix = namespace + separator if namespace else None

    def reads_image_property(self, key):
        """Every property, or with a namespace only those in it (scheduler.policy.extra_specs)."""
        return self._checked(key)

    def _checked(self, key):
        return self.prefix is None or key.startswith(self.prefix)

    def host_passes(self, host_state, spec):
        offered = {}
        for aggregate in host_state.aggregates:
            for key, value in aggregate.metadata.items():
                offered.setdefault(key, set()).update(aggregates.pieces(value))
        props = spec.image_properties
        for key, options in offered.items():
            if not self._checked(key):
                continue
            prop = props.get(key)
            if prop and str(prop) not in options:
                return False
        return True

    def filter_vector(self, table, rows, spec):
        wanted = tuple(sorted((key, str(prop)) for key, prop in spec.image_properties.items()
                              if prop and self._checked(key)))
        passed = True
        for key, prop in wanted:
            passed = passed & aggregates.admitted_rows(
                table, rows, ("image_props_isolation", key, prop), lambda a, key=key: key in a.metadata,
                lambda a, key=key, prop=prop: prop in aggregates.pieces(a.metadata[key]))
        return passed
