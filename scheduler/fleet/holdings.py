"""What an agent holds, set against what the database records on its host.

Pure: the caller reads the rows and acts. Each difference says what to do:

- ``terminate``: the agent holds an instance the database has as DELETED, in
  ERROR on no host, or on another host (a terminate that was lost, a build
  moved elsewhere after its timeout), or still DELETING long after the
  terminate was sent (it failed on the agent): it must go from this host, as
  Nova's ``running_deleted_instance_action = reap`` does. The other host of a
  move under way (its ``move_host``) holds it rightly, until the move ends.
- ``build``: the database has the instance SCHEDULED on the host, settled, and the
  agent does not hold it: its build cast was lost (with its scheduler, or in the
  broker); it is sent again, and the agent asks before building it (start_build).
- ``note``: worth saying, not worth acting on: an instance the agent holds and
  the database does not know at all (a database restored from an old backup
  must not make every agent destroy what it runs), or one the database has
  ACTIVE on the host that the agent no longer holds.

And the moves an agent did not hear of (``unheard``): a move the database has
under way to the host that the agent does not hold, a resize in place whose end
the database recorded while the agent still holds it open. Their command is sent
again: agents ignore a repeat.
"""

import dataclasses

from scheduler import states


@dataclasses.dataclass(frozen=True)
class Difference:
    instance_uuid: str
    action: str  # "terminate", "build" or "note"
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
    for uuid, row in sorted(recorded.items()):
        if uuid not in held and row["host"] == host and row["state"] == states.SCHEDULED \
                and row["updated_at"] < settled_before:
            why = f"{host} does not hold {uuid}, SCHEDULED there since {row['updated_at']:%H:%M:%S}"
            found.append(Difference(uuid, "build", why))
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


#: The statuses of a migration that ended (scheduler.db.moves.ENDED_STATUSES).
ENDED = ("confirmed", "reverted", "completed", "error")


@dataclasses.dataclass(frozen=True)
class Unheard:
    migration: dict
    command: str  # "move": take the instance in (move_instance); "end": end the resize (end_resize)
    why: str


def unheard(host, held, open_moves, moves, settled_before):
    """The commands of moves ``host``'s agent missed, or whose answer the scheduler missed, from its
    report (``held``: uuids it holds; ``open_moves``: {uuid: [migration id, "moving" or "done"]} of
    the moves it holds open, None from an agent that does not say) and ``moves`` ({id: migration
    row} of the moves under way, and of those ids).

    A move under way to the host is told again when its agent does not hold it, or holds it done
    (its word that it is done was lost: it says it again); the end of a resize in place when its
    host holds it open after the database ended it. Only moves whose row last changed before
    ``settled_before``: a younger command or answer may be on its way still.
    """
    found = []
    open_moves = None if open_moves is None else {uuid: tuple(entry) for uuid, entry in open_moves.items()}
    for uuid, (migration_id, _) in sorted((open_moves or {}).items()):
        migration = moves.get(migration_id)
        if migration is None or migration["instance_uuid"] != uuid or migration["dest_host"] != host \
                or migration["source_host"] != host:
            continue  # a move in: the instance's row says whether the host keeps it (differences)
        if migration["status"] in ENDED and migration["updated_at"] < settled_before:
            why = (f"{host} holds resize {migration_id} of {uuid} open, which was {migration['status']} at "
                   f"{migration['updated_at']:%H:%M:%S}")
            found.append(Unheard(migration, "end", why))
    if open_moves is None:
        return found  # an agent of a release before this one: it says not which moves it holds open
    for migration in moves.values():
        if migration["status"] != "migrating" or migration["dest_host"] != host \
                or migration["updated_at"] >= settled_before:
            continue
        uuid = migration["instance_uuid"]
        entry = open_moves.get(uuid)
        if entry == (migration["id"], "moving"):
            continue  # under way on the agent
        if entry == (migration["id"], "done") or (entry is None and uuid in held
                                                   and migration["source_host"] != host):
            why = (f"{host} is done with {migration['kind']} {migration['id']} of {uuid}, which the database "
                   f"has under way since {migration['updated_at']:%H:%M:%S}")
        else:
            why = (f"{host} has not taken in {migration['kind']} {migration['id']} of {uuid}, recorded at "
                   f"{migration['updated_at']:%H:%M:%S}")
        found.append(Unheard(migration, "move", why))
    return found
