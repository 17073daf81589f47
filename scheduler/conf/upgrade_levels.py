"""``[upgrade_levels]``: the newest version of each RPC API this service sends.

During a rolling upgrade, services of two releases run side by side: a client of the
new release capped at the previous release's version of an API sends what the servers
of that release serve (install guide: Rolling upgrades). Nova's group and option names.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from oslo_config import cfg, types

from berth_contract import versions
from scheduler import api_versions

LOG = logging.getLogger(__name__)

group = cfg.OptGroup(
    "upgrade_levels",
    title="RPC API version caps, for rolling upgrades",
    help="The newest version of each RPC API this service sends. Unset (the default): the newest this "
    "release speaks. While services of an older release still serve an API, set its cap on every "
    "service of this release to the version they serve: a message that needs a newer version is then "
    "sent in its older form where it has one, and refused with RPCVersionCapError where it has none. "
    "Remove the caps once every service runs this release (install guide: Rolling upgrades).",
)


class _Version(types.String):
    """``MAJOR.MINOR`` of one of the API's major versions, or empty (no cap)."""

    def __init__(self, api: versions.API) -> None:
        super().__init__(type_name="version value")
        self.api = api

    def __call__(self, value: Any) -> str:
        value = super().__call__(value)
        if not value:
            return value
        major = versions.parse(value)[0]
        if major not in self.api.majors:
            raise ValueError(f"{value!r} is not a version of the {self.api.name} API this release speaks: "
                             f"its versions are {self.api.history[0][0]} to {self.api.version}")
        return value


def _cap(api: versions.API, what: str) -> cfg.Opt:
    history = "; ".join(f"{version}: {added}" for version, added in api.history)
    return cfg.Opt(api.name, type=_Version(api),
                   help=f"Newest version of the {api.name} API ({what}) this service sends. Unset: the "
                   f"newest this release speaks, {api.version}. Its versions: {history}.")


@functools.cache
def _opts() -> list[cfg.Opt]:
    return [
        _cap(api_versions.SCHEDULER, "the schedulers' boots, deletes, reads, and the agents' reports and "
             "updates; sent by the agents, the API services, berth and the schedulers' scaling controller"),
        _cap(api_versions.COMPUTE, "the agents' builds and terminates; sent by the schedulers, and by "
             "berth fake-load"),
        _cap(api_versions.ADMIN, "aggregates, server groups, hosts and flavors; sent by berth, and by the "
             "schedulers to each other when aggregates or hosts change"),
        _cap(api_versions.SCALING, "scaling groups and instance metrics; sent by berth"),
    ]


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    return [(group, _opts())]


def cap(conf: cfg.ConfigOpts, api: versions.API) -> str | None:
    """The version cap ``conf`` sets on ``api``'s clients, or None."""
    return conf.upgrade_levels[api.name] or None


def log_caps(conf: cfg.ConfigOpts) -> None:
    """Say at start which APIs this service sends older versions of, and what that holds back."""
    for api in api_versions.ALL:
        version_cap = cap(conf, api)
        if version_cap is None:
            continue
        held = [f"{version} ({added})" for version, added in api.history
                if not versions.is_compatible(version_cap, version)]
        if held:
            LOG.info("[upgrade_levels] %s = %s: this service sends the %s API at version %s at newest "
                     "(this release speaks %s); held back: %s. Remove the cap once every server of the %s "
                     "API runs this release", api.name, version_cap, api.name, version_cap, api.version,
                     "; ".join(held), api.name)
        else:
            LOG.info("[upgrade_levels] %s = %s: no version of the %s API this release speaks (up to %s) is "
                     "above it: nothing held back", api.name, version_cap, api.name, api.version)
