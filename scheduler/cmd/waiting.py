"""Waiting for instances to settle: ``berth boot --wait``, ``delete --wait`` and the demos."""

import time

from scheduler import states
from scheduler.cmd.arguments import CommandError
from scheduler.cmd.references import instances_by_uuid

SETTLED = (states.ACTIVE, states.ERROR, states.DELETED)


def wait_until(predicate, timeout, what, interval=0.2):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise CommandError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def wait_for(client, uuids, timeout, settled=SETTLED):
    """Poll until every instance is in ``settled``; returns {uuid: instance}.

    Each poll asks only for the instances not settled yet, a page at a time.
    """
    wanted, found = list(dict.fromkeys(uuids)), {}

    def all_settled():
        pending = [u for u in wanted if found.get(u, {}).get("state") not in settled]
        found.update(instances_by_uuid(client, pending))
        return all(found.get(u, {}).get("state") in settled for u in wanted)

    pending = len(wanted)
    wait_until(all_settled, timeout, f"{pending} instance(s) to reach {'/'.join(settled)}")
    return dict(found)
