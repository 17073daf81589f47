"""ImagePropertiesWeigher: hosts whose instances run images like the request's weigh more (Nova's).

For each image property the request shares (name and value) with instances
on the host, both read as Nova's ImageMetaProps reads them (image_meta.nova_props:
only Nova's image metadata fields, so ``custom_tag`` counts nothing; legacy
names such as ``architecture`` taken as ``hw_architecture``; ``amd64`` as
``x86_64``, ``Linux`` as ``linux``, ``yes`` as ``True``, ``04`` as ``4``...),
the weight adds how many of them have it, times the property's ratio in
``image_props_weight_setting`` (every property counts 1 when the setting is
empty; a property it does not name counts 0). A positive multiplier packs
such instances together, a negative one spreads them; 0, the default as in
Nova, turns the weigher off. Agents report the counts (``image_properties``)
from the requests of the instances they hold, each instance's properties as
Nova's compute keeps them and ImageMetaProps reads them; the scheduler reads
the counts of an agent that predates that the same way when it reads its report.
"""

import numpy as np
from oslo_config import cfg

from berth_contract import image_meta
from scheduler.policy import weighers
from scheduler.policy.weighers.metrics import parse_setting

opts = [
    weighers.multiplier_opt("image_props_weight_multiplier",
                            "ImagePropertiesWeigher: positive packs instances of alike images "
                            "together, negative spreads them; 0 turns it off.", default=0.0),
    cfg.ListOpt(
        "image_props_weight_setting",
        default=[],
        help="ImagePropertiesWeigher: name=ratio pairs, the weight of each image property "
        "(empty: every property weighs 1).",
    ),
]


def list_opts():
    return [("filter_scheduler", opts)]


class ImagePropertiesWeigher(weighers.BaseHostWeigher):
    multiplier_option = "image_props_weight_multiplier"

    def __init__(self, conf):
        super().__init__(conf)
        self.setting = dict(parse_setting(conf.filter_scheduler.image_props_weight_setting))

    def _off(self):
        return self.conf.filter_scheduler.image_props_weight_multiplier == 0.0

    def _wanted(self, spec):
        return set(image_meta.nova_props(spec.image_properties).items())

    def _weight(self, counts, wanted):
        weight = 0.0
        for name, value in wanted:
            count = counts.get(name, {}).get(value, 0)
            if count:
                weight += (self.setting.get(name, 0.0) if self.setting else 1) * count
        return weight

    def weigh(self, host_state, spec):
        if self._off():
            return 0.0
        return self._weight(host_state.image_properties, self._wanted(spec))

    def weigh_vector(self, table, rows, spec):
        wanted = self._wanted(spec)
        if self._off() or not wanted:
            return None
        numbers = table.row_numbers(rows)
        return np.fromiter(
            (self._weight(table.extra.get(int(r), {}).get("image_properties", {}), wanted) for r in numbers),
            dtype=np.float64, count=len(numbers))
