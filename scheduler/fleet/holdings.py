"""What an agent holds, set against what the database records on its host.

Pure: the caller reads the rows and acts. Each difference says what to do:

- ``terminate``: the agent holds an instance the database has as DELETED, in
  ERROR on no host, or on another host (a terminate that was lost, a build
  moved elsewhere after its timeout), or still DELETING long after the
  terminate was sent (it failed on the agent): it must go from this host, as
  Nova's ``running_deleted_instance_action = reap`` does. The other host of a
  move under way (its ``move_host``) holds it rightly, until the move ends.
- ``note``: worth saying, not worth acting on: an instance the agent holds and
  the database does not know at all (a database restored from an old backup
  must not make every agent destroy what it runs), or one the database has
  ACTIVE on the host that the agent no longer holds.
"""

import dataclasses

from scheduler import states


@dataclasses.dataclass(frozen=True)
class Difference:
    instance_uuid: str
    action: str  # "terminate" or "note"
    why: str


def differences(host, held, recorded, settled_before):
    """The differences between what ``host``'s agent reports holding (``held``, uuids)
    and ``recorded`` ({uuid: row} of the instances the database has either on the
    host or among ``held``; a row has state, host, updated_at as a naive datetime).

    ``settled_before``: rows last updated before this time (the database's clock)
    are settled; younger ones may be in flight (a terminate not handled yet, a
    claim the report predates) and are left alone.
    """
    found = []
    held = set(held)
    for uuid in sorted(held):
        row = recorded.get(uuid)
        if row is None:
            found.append(Difference(uuid, "note", f"{host} holds {uuid}, which the database does not know; "
                                                  "left alone"))
            continue
        state, where = row["state"], row["host"]
        if where != host and state in states.MOVING and row.get("move_host") == host:
            continue  # the other end of a move under way: it holds the instance until the move ends
        if state == states.DELETED:
            found.append(Difference(uuid, "terminate", f"{host} holds {uuid}, which was deleted"))
        elif where != host and state == states.ERROR:
            found.append(Difference(uuid, "terminate", f"{host} holds {uuid}, which is in ERROR on no host"))
        elif where != host:
            found.append(Difference(uuid, "terminate",
                                    f"{host} holds {uuid}, which is {state} on {where or 'no host'} now"))
        elif state == states.DELETING and row["updated_at"] < settled_before:
            since = f"{row['updated_at']:%H:%M:%S}"
            found.append(Difference(uuid, "terminate", f"{host} still holds {uuid}, DELETING since {since}"))
    for uuid, row in sorted(recorded.items()):
        if uuid not in held and row["host"] == host and row["state"] == states.ACTIVE \
                and row["updated_at"] < settled_before:
            found.append(Difference(uuid, "note", f"the database has {uuid} ACTIVE on {host}, which no "
                                                  "longer reports it"))
    return found
