"""ExampleDriver: a compute driver of another distribution, with options of its own.

It reports the [example_driver] sizes and builds at once, as a hypervisor's
driver would once it had asked the hypervisor.
"""

from oslo_config import cfg

from compute_agent.driver import base

opts = [
    cfg.IntOpt("memory_mb", default=2048, min=1, help="ExampleDriver: the memory (MiB) of its host."),
    cfg.StrOpt("cpu_arch", default="aarch64", help="ExampleDriver: the architecture of its host."),
]


def list_opts():
    return [("example_driver", opts)]


class ExampleDriver(base.ComputeDriver):
    name = "example"
    hypervisor_type = "example"

    def get_totals(self):
        return {"memory_mb": self.conf.example_driver.memory_mb, "local_gb": 20, "vcpus": 2}

    def spawn(self, instance):
        self._wait(0)

    def destroy(self, instance):
        pass

    def migrate_in(self, instance, migration):
        self._wait(0)

    def resize(self, instance, migration):
        self._wait(0)
