"""ServerGroupSoftAffinityWeigher and ServerGroupSoftAntiAffinityWeigher.

For a request in a server group of policy ``soft-affinity`` (resp.
``soft-anti-affinity``), a host weighs the number of the group's members it
holds (resp. minus that number): members gather where they can (resp.
spread) without the hard filters' refusal when they cannot.
"""


from scheduler.policy import server_groups, weighers

opts = [
    weighers.multiplier_opt("soft_affinity_weight_multiplier",
                            "ServerGroupSoftAffinityWeigher: how strongly members of a "
                            "soft-affinity group gather on the hosts that hold members already.", min=0.0),
    weighers.multiplier_opt("soft_anti_affinity_weight_multiplier",
                            "ServerGroupSoftAntiAffinityWeigher: how strongly members of a "
                            "soft-anti-affinity group spread away from each other.", min=0.0),
]


def list_opts():
    return [("filter_scheduler", opts)]


class _SoftAffinityWeigher(weighers.BaseHostWeigher):
    abstract = True
    policy = None
    sign = 1

    def weigh(self, host_state, spec):
        if server_groups.policy(spec) != self.policy:
            return 0
        return self.sign * server_groups.members_on_host(host_state, spec)

    def idle(self, spec):
        return server_groups.policy(spec) != self.policy

    def weigh_vector(self, table, rows, spec):
        if self.idle(spec):
            return None
        return self.sign * server_groups.members_on_rows(table, rows, spec)


class ServerGroupSoftAffinityWeigher(_SoftAffinityWeigher):
    policy = server_groups.SOFT_AFFINITY
    group_policies = (policy,)
    multiplier_option = "soft_affinity_weight_multiplier"


class ServerGroupSoftAntiAffinityWeigher(_SoftAffinityWeigher):
    policy = server_groups.SOFT_ANTI_AFFINITY
    group_policies = (policy,)
    sign = -1
    multiplier_option = "soft_anti_affinity_weight_multiplier"
