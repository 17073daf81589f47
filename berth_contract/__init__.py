"""The contract between Berth's scheduler, its compute agents and their clients: what goes on
the wire (request specs, host reports, resource classes, traits, image properties, flavors,
instance metrics, the names of hosts and queues, the RPC APIs' versions) and the one check
of each, on either side of it.

It imports nothing else of Berth's, so that an agent or a client takes it without the
scheduler's policy, database or messaging. Pure: no I/O.
"""
