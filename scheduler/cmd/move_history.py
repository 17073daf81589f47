"""The moves of an instance, as ``berth server show`` gives them in its ``moves`` field."""

import logging

from scheduler import migration_states as moves
from scheduler import rpc

LOG = logging.getLogger(__name__)

#: The fields of each move in ``berth server show -f json|yaml``.
FIELDS = ("id", "kind", "status", "source_host", "dest_host", "created_at", "finished_at", "reason",
          "figures")


def history(client, uuid):
    """The moves of instance ``uuid``, newest first; None when the scheduler cannot list them
    (one of the release before moves)."""
    try:
        return client.list_migrations({}, instance_uuid=uuid)
    except (rpc.RemoteError, rpc.RPCVersionCapError) as exc:
        LOG.debug("No moves shown for %s: %s", uuid, exc)
        return None


def records(moves_of):
    """Each move as ``berth server show -f json`` gives it."""
    return [{key: move.get(key) for key in FIELDS} for move in moves_of]


def lines(records_of):
    """The moves (``records``, newest first) as the table of ``berth server show`` words them: one
    line each, or "none"."""
    if not records_of:
        return "none"
    return "\n".join(
        f"{m['kind']} {m.get('source_host') or '-'} -> {m.get('dest_host') or '-'}, {m.get('created_at')}"
        f" to {m.get('finished_at') or 'now'}: {_outcome(m)}" for m in records_of)


def _outcome(migration):
    status, reason = migration["status"], migration.get("reason")
    return f"{status}: {reason}" if reason and status == moves.ERROR else status
