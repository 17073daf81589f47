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
- ``power``: the agent holds an instance the database has had POWERING_OFF,
  POWERING_ON or REBOOTING since before ``settled_before``: the stop, start or
  reboot was lost on its way (a scheduler that died between its commit and its
  cast), or the agent's word that it was done was (an agent killed before it
  sent it); the agent is told again, and says again what it did already (a
  reboot told again, whose end was lost, reboots again, soft).
- ``note``: worth saying, not worth acting on: an instance the agent holds and
  the database does not know at all (a database restored from an old backup
  must not make every agent destroy what it runs), or one the database has
  ACTIVE (or SHUTOFF, or its power changing) on the host that the agent no
  longer holds. A SHUTOFF instance its host's agent holds is as an ACTIVE
  one: held rightly, its claim kept; never lost, never terminated.

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
    action: str  # "terminate", "build", "power" or "note"
    why: str
    #: Of a "power": the agent's action to tell again (compute_agent.client.POWER_ACTIONS).
    power: str | None = None


#: The power action an agent is told again, by the state its instance waits in.
POWER_AGAIN = {states.POWERING_OFF: "power_off", states.POWERING_ON: "power_on", states.REBOOTING: "reboot"}


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
        elif state in states.POWERING and row["updated_at"] < settled_before:
            since = f"{row['updated_at']:%H:%M:%S}"
            found.append(Difference(uuid, "power", f"{host} holds {uuid}, {state} since {since}",
                                    POWER_AGAIN[state]))
        elif state == states.DELETING and row["updated_at"] < settled_before:
            since = f"{row['updated_at']:%H:%M:%S}"
            found.append(Difference(uuid, "terminate", f"{host} still holds {uuid}, DELETING since {since}"))
    for uuid, row in sorted(recorded.items()):
        if uuid not in held and row["host"] == host and row["state"] in (states.ACTIVE, *states.POWER) \
                and row["updated_at"] < settled_before:
            found.append(Difference(uuid, "note", f"the database has {uuid} {row['state']} on {host}, which "
                                                  "no longer reports it"))
    return found


#: The statuses of a migration that ended (scheduler.db.moves.ENDED_STATUSES).
ENDED = ("confirmed", "reverted", "completed", "error")
#: Those of a move whose instance stays on its source.
NOT_KEPT = ("reverted", "error")
#: What move_steps say of the agent doing each step of a move between two agents.
WORKING = {"prepare": "preparing", "migrate": "migrating", "finish": "finishing"}
#: What move_steps say of a move's source.
OUT = ("migrating", "migrated")


@dataclasses.dataclass(frozen=True)
class Unheard:
    migration: dict
    command: str  # "move": take the instance in (move_instance); "end": end the resize (end_resize)
    why: str


def unheard(host, held, open_moves, moves, settled_before, move_steps=None):
    """The commands of moves ``host``'s agent missed, or whose answer the scheduler missed, from its
    report (``held``: uuids it holds; ``open_moves``: {uuid: [migration id, "moving" or "done"]} of
    the moves it holds open, None from an agent that does not say; ``move_steps``: {uuid: [migration
    id, step]} of the moves between two agents it is part of) and ``moves`` ({id: migration row} of
    the moves under way, and of those ids).

    A move under way is told again to the agent whose step it is at when that agent is not doing
    it: it does not hold it, or holds it done (its word that it is done was lost: it says it
    again). The end of a resize in place is told again when its host holds it open after the
    database ended it, and the end of a move between two agents that failed when its source still
    holds it out. Only moves whose row last changed before ``settled_before``: a younger command
    or answer may be on its way still.
    """
    open_moves = None if open_moves is None else {uuid: tuple(entry) for uuid, entry in open_moves.items()}
    move_steps = {uuid: tuple(entry) for uuid, entry in (move_steps or {}).items()}
    found = _ends_unheard(host, open_moves or {}, move_steps, moves, settled_before)
    if open_moves is None:
        return found  # an agent of a release before this one: it says not which moves it holds open
    for migration in moves.values():
        if migration["status"] != "migrating" or migration["updated_at"] >= settled_before:
            continue
        if migration.get("step") is not None and migration["source_host"] != migration["dest_host"]:
            told = _step_unheard(host, migration, move_steps)
        elif migration["dest_host"] == host:
            told = _taken_in_unheard(host, migration, open_moves, held)
        else:
            told = None
        if told is not None:
            found.append(told)
    return found


def _ends_unheard(host, open_moves, move_steps, moves, settled_before):
    """The ends of moves the agent holds open after the database ended them: a resize in place,
    and a move between two agents that its source holds out though it failed (or was reverted)."""
    found = []
    for uuid, (migration_id, _) in sorted(open_moves.items()):
        migration = moves.get(migration_id)
        if migration is None or migration["instance_uuid"] != uuid or migration["dest_host"] != host \
                or migration["source_host"] != host:
            continue  # a move in: the instance's row says whether the host keeps it (differences)
        if migration["status"] in ENDED and migration["updated_at"] < settled_before:
            why = (f"{host} holds resize {migration_id} of {uuid} open, which was {migration['status']} at "
                   f"{migration['updated_at']:%H:%M:%S}")
            found.append(Unheard(migration, "end", why))
    for uuid, (migration_id, word) in sorted(move_steps.items()):
        migration = moves.get(migration_id)
        if migration is None or migration["instance_uuid"] != uuid or migration["source_host"] != host:
            continue
        if word in OUT and migration["status"] in NOT_KEPT and migration["updated_at"] < settled_before:
            why = (f"{host} holds {migration['kind']} {migration_id} of {uuid} out, which was "
                   f"{migration['status']} at {migration['updated_at']:%H:%M:%S}")
            found.append(Unheard(migration, "end", why))
    return found


def _step_unheard(host, migration, move_steps):
    """The step of a move between two agents, told again if ``host`` is the agent whose step it is
    at and is not doing it."""
    step, uuid = migration["step"], migration["instance_uuid"]
    if (migration["source_host"] if step == "migrate" else migration["dest_host"]) != host:
        return None
    entry = move_steps.get(uuid)
    if entry == (migration["id"], WORKING[step]):
        return None  # under way on the agent
    said = "nothing of it" if entry is None or entry[0] != migration["id"] else entry[1]
    why = (f"{host} is not at the {step} step of {migration['kind']} {migration['id']} of {uuid} "
           f"(it says {said}), recorded at {migration['updated_at']:%H:%M:%S}")
    return Unheard(migration, "move", why)


def _taken_in_unheard(host, migration, open_moves, held):
    """A move its destination ``host`` takes in alone (or a resize in place), told again unless
    under way there."""
    uuid = migration["instance_uuid"]
    entry = open_moves.get(uuid)
    if entry == (migration["id"], "moving"):
        return None  # under way on the agent
    if entry == (migration["id"], "done") or (entry is None and uuid in held
                                               and migration["source_host"] != host):
        why = (f"{host} is done with {migration['kind']} {migration['id']} of {uuid}, which the database "
               f"has under way since {migration['updated_at']:%H:%M:%S}")
    else:
        why = (f"{host} has not taken in {migration['kind']} {migration['id']} of {uuid}, recorded at "
               f"{migration['updated_at']:%H:%M:%S}")
    return Unheard(migration, "move", why)
