"""The placement policy: the host table, filters, weighers, selection, hints and
the plugin API. Pure: nothing here reads a database or a broker.

What a request and a report are (their wire form and checks) is the contract's:
berth_contract. Its modules that lived here can still be imported from here, deprecated
(scheduler.policy.deprecated_paths)."""

from scheduler.policy import deprecated_paths

deprecated_paths.install()
