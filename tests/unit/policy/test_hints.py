"""A request asking for what no enabled plugin honours is refused, naming the plugin."""

import pytest

from berth_contract.request_spec import RequestSpec
from scheduler.conf import opts
from scheduler.policy import filters, hints, weighers

UUID = "00000000-0000-4000-8000-000000000001"


def spec(hint=None, zone=None, policy=None):
    properties = {"availability_zone": zone} if zone else {}
    made = RequestSpec.from_wire(
        {"instance_uuids": [UUID], "instance_type": {"memory_mb": 512, "vcpus": 1},
         "instance_properties": properties},
        {"scheduler_hints": dict([hint]) if hint else {}})
    if policy:
        made.group = {"uuid": "g1", "policy": policy, "rules": {}, "members": [], "placed": [], "hosts": {}}
    return made


def unhonoured(conf, request, enabled_filters=None, enabled_weighers=None):
    opts.register_plugin_opts(conf)
    if enabled_filters is not None:
        conf.set_override("enabled_filters", enabled_filters, "filter_scheduler")
    if enabled_weighers is not None:
        conf.set_override("weighers", enabled_weighers, "filter_scheduler")
    enabled = filters.enabled_filters(conf) + weighers.enabled_weighers(conf)
    return hints.unhonoured(request, enabled, filters.all_filters(), weighers.all_weighers())


@pytest.mark.parametrize("request_", [
    spec(("group", "g1"), policy="anti-affinity"), spec(policy="affinity"), spec(policy="soft-affinity"),
    spec(policy="soft-anti-affinity"), spec(zone="az1"), spec(("availability_zone", "az1")),
    spec(("same_host", UUID)), spec(("different_host", UUID)), spec(("query", '[">=", "$free_ram_mb", 1]')),
    spec(),
])
def test_the_defaults_honour_every_hint_and_policy_berth_boot_accepts(conf, request_):
    assert unhonoured(conf, request_) is None


@pytest.mark.parametrize("request_, filters_, weighers_, why", [
    (spec(policy="anti-affinity"), ["RamFilter"], None,
     "server group g1 has policy anti-affinity, which ServerGroupAntiAffinityFilter enforces; it is not "
     "enabled: add it to [filter_scheduler] enabled_filters"),
    (spec(policy="soft-affinity"), None, ["RAMWeigher"],
     "server group g1 has policy soft-affinity, which ServerGroupSoftAffinityWeigher enforces; it is not "
     "enabled: add it to [filter_scheduler] weighers"),
    (spec(zone="az1"), ["RamFilter"], None,
     "the availability zone is honoured by AvailabilityZoneFilter, which is not enabled: add it to "
     "[filter_scheduler] enabled_filters, or leave the hint out"),
    (spec(("query", '[">=", "$free_ram_mb"')), None, None,
     "JsonFilter: scheduler hint query: query is not JSON: "),
    (spec(("preferred_hosts", "h1")), None, None,
     "scheduler hint preferred_hosts is honoured by CapacityWeigher, which is not enabled: add it to "
     "[filter_scheduler] weighers, or leave the hint out"),
    (spec(("colour", "blue")), None, None, "no installed filter or weigher reads scheduler hint colour; "
                                           "leave it out"),
    (spec(("sam_host", "web-1")), None, None, "no installed filter or weigher reads scheduler hint sam_host: "
                                              "did you mean same_host?"),
])
def test_what_no_enabled_plugin_honours_is_refused_naming_it(conf, request_, filters_, weighers_, why):
    assert unhonoured(conf, request_, filters_, weighers_).startswith(why)
