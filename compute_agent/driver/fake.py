"""A simulated host of configurable size ([compute_agent] fake_*)."""

from compute_agent.driver import base


class FakeDriver(base.ComputeDriver):
    hypervisor_type = "fake"

    def get_totals(self):
        opts = self.conf.compute_agent
        return {
            "memory_mb": opts.fake_memory_mb,
            "local_gb": opts.fake_local_gb,
            "vcpus": opts.fake_vcpus,
        }

    def spawn(self, instance):
        self._wait(self.conf.compute_agent.fake_build_time)

    def destroy(self, instance):
        pass
