"""ReservedRamFilter: every host keeps some RAM free."""

from oslo_config import cfg

from scheduler.policy import filters

opts = [
    cfg.IntOpt(
        "reserved_ram_mb",
        default=512,
        min=0,
        help="ReservedRamFilter: the RAM (MB) a host keeps free; it takes an instance only "
        "when its free RAM less the instance's is at least this.",
    ),
]


def register_opts(conf):
    conf.register_opts(opts, "example_plugin")


def list_opts():
    return [("example_plugin", opts)]


class ReservedRamFilter(filters.BaseHostFilter):
    def host_passes(self, host_state, spec):
        return host_state.free_ram_mb - spec.flavor.memory_mb >= self.conf.example_plugin.reserved_ram_mb
