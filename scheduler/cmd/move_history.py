"""The moves of an instance, as ``berth show`` lists them under its other lines (the
columns of ``openstack server migration list``)."""

import io
import logging

from scheduler import migration_states as moves
from scheduler import rpc
from scheduler.cmd import output

LOG = logging.getLogger(__name__)

COLUMNS = ["KIND", "FROM", "TO", "STARTED", "ENDED", "OUTCOME"]


#: The fields of each move in ``berth show -f json|yaml``.
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
    """Each move as ``berth show -f json`` gives it."""
    return [{key: move.get(key) for key in FIELDS} for move in moves_of]


def print_history(history, out):
    """``history`` (the moves of an instance, newest first) under the lines of ``berth show``:
    nothing when it has none."""
    if not history:
        return
    print(f"{'moves':13} {len(history)}", file=out)
    table = io.StringIO()
    output.print_columns(COLUMNS, [
        [m["kind"], m.get("source_host"), m.get("dest_host"), m.get("created_at"), m.get("finished_at"),
         _outcome(m)] for m in history], table)
    for line in table.getvalue().splitlines():
        print(f"  {line}", file=out)


def _outcome(migration):
    status, reason = migration["status"], migration.get("reason")
    return f"{status}: {reason}" if reason and status == moves.ERROR else status
