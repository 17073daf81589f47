"""Waiting for instances and moves to settle: ``--wait`` of ``boot``, ``delete``, ``stop``,
``start``, ``reboot``, ``resize``, ``migrate``, ``host evacuate``, and the demos.

While it waits, :class:`Progress` tells how far it is on stderr: one line rewritten in place on a
terminal (``3/4 ACTIVE, 1 BUILDING (12 s)``), else one line as each one settles. A timeout names
those still pending, their state and host; Ctrl-C is turned into :class:`Interrupted`, one line
saying what was left doing (the scheduler carries on). Time comes only through the ``clock``
and ``sleep`` given, so that tests wait for a fake scheduler without waiting.
"""

import shutil
import sys
import time

from scheduler import migration_states as moves
from scheduler import states
from scheduler.cmd.arguments import CommandError, Interrupted
from scheduler.cmd.references import instances_by_uuid

SETTLED = (states.ACTIVE, states.ERROR, states.DELETED)
#: The pending ones a timeout or an interruption names; the others are counted.
NAMED = 5
#: Seconds between two looks at moves (each a call per instance).
MOVE_INTERVAL = 1.0
#: What an instance the scheduler does not list yet is called.
UNKNOWN = "not listed yet"


class Progress:
    """Where a wait tells its progress: ``status`` rewrites one line of a terminal (nothing
    elsewhere), ``event`` prints one line where no terminal is (nothing on one)."""

    def __init__(self, stream=None, tty=None):
        self.stream = sys.stderr if stream is None else stream
        self.tty = is_tty(self.stream) if tty is None else tty
        self._drawn = 0  # the width of the line on screen

    def status(self, text):
        if self.tty:
            text = text[:shutil.get_terminal_size().columns - 1]  # a line that wrapped could not be rewritten
            self.stream.write("\r" + text + " " * max(0, self._drawn - len(text)))
            self.stream.flush()
            self._drawn = len(text)

    def event(self, text):
        if not self.tty:
            print(text, file=self.stream, flush=True)

    def clear(self):
        if self._drawn:
            self.stream.write("\r" + " " * self._drawn + "\r")
            self.stream.flush()
            self._drawn = 0


class Silent(Progress):
    """Tells nothing: for the demos, whose own lines say what they do."""

    def __init__(self):
        super().__init__(tty=False)

    def event(self, text):
        pass


def is_tty(stream):
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def wait_until(predicate, timeout, what, interval=0.2, sleep=None, clock=None):
    """Poll ``predicate`` until it holds; a timeout or Ctrl-C names ``what`` was waited for."""
    sleep, clock = sleep or time.sleep, clock or time.monotonic
    deadline = clock() + timeout
    try:
        while not predicate():
            if clock() > deadline:
                raise CommandError(f"timed out after {timeout} s waiting for {what}")
            sleep(interval)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted waiting for {what}") from None


class Kind:
    """How the things a wait follows are told: instances (rows of ``berth server list``)."""

    noun = "instance(s)"
    #: What the interruption says goes on, and where to see it.
    carries_on = "the scheduler carries on: `berth server list` shows them"

    def state(self, record):
        return record.get("state") or UNKNOWN

    def name(self, key, record):
        name = record.get("display_name")
        return f"{key} ({name})" if name else key

    def where(self, record):
        host = record.get("host")
        return f"on {host}" if host else "on no host yet" if record else ""

    def settled_line(self, key, record):
        host = record.get("host")
        return f"{self.name(key, record)} {self.state(record)}" + (f" on {host}" if host else "")


class Moves(Kind):
    """Moves, by their migration: an instance's name, its migration's status, from where to where."""

    noun = "move(s)"
    carries_on = "the moves go on: `berth server migration list` shows them"

    def __init__(self, names=None):
        self.names = names or {}

    def state(self, record):
        return record.get("status") or UNKNOWN

    def name(self, key, record):
        uuid = record.get("instance_uuid", key)
        name = self.names.get(uuid)
        return f"migration {key} of {uuid}" + (f" ({name})" if name else "")

    def where(self, record):
        return f"from {record.get('source_host') or '-'} to {record.get('dest_host') or '-'}"

    def settled_line(self, key, record):
        line = f"{self.name(key, record)} {self.state(record)} {self.where(record)}"
        return line + (f": {record['reason']}" if record.get("reason") else "")


def watch(look, keys, settled, timeout, kind=None, progress=None, interval=0.2, sleep=None, clock=None,
          known=None):
    """Poll ``look(pending keys)`` ({key: record}) until every key's record is ``settled``;
    {key: record} of them all. Progress goes to ``progress`` (stderr by default); ``known``:
    the records as they were before the first look."""
    sleep, clock = sleep or time.sleep, clock or time.monotonic
    kind = kind or Kind()
    progress = Progress() if progress is None else progress
    wanted, found, told = list(dict.fromkeys(keys)), {}, set()

    def pending():
        return [k for k in wanted if k not in told]

    found.update(known or {})
    start = clock()
    deadline = start + timeout

    try:
        while True:
            found.update(look(pending()))
            for key in wanted:
                if key in found and key not in told and settled(found[key]):
                    told.add(key)
                    progress.event(kind.settled_line(key, found[key]))
            left = pending()
            if not left:
                return {k: found[k] for k in wanted if k in found}
            now = clock()
            progress.status(f"{_counts(kind, wanted, found, left)} ({now - start:.0f} s)")
            if now > deadline:
                progress.clear()
                raise CommandError(f"timed out after {timeout} s waiting for {len(left)} of {len(wanted)} "
                                   f"{kind.noun}: still {_named(kind, left, found)}")
            sleep(interval)
    except KeyboardInterrupt:
        left = pending()
        states_left = _states(kind, left, found)
        still = (states_left.split(" ", 1)[1] if len({kind.state(found.get(k, {})) for k in left}) == 1
                 else f"pending ({states_left})")
        raise Interrupted(f"interrupted: {len(left)} {kind.noun} still {still}; {kind.carries_on}") from None
    finally:
        progress.clear()


def _counts(kind, wanted, found, left):
    """``3/4 ACTIVE, 1 BUILDING``: the settled ones by state, then the pending ones by state."""
    done = {}
    for key in wanted:
        if key not in left:
            state = kind.state(found[key])
            done[state] = done.get(state, 0) + 1
    first = ", ".join(f"{n}/{len(wanted)} {state}" for state, n in done.items()) or f"0/{len(wanted)} settled"
    return f"{first}, {_states(kind, left, found)}"


def _states(kind, keys, found):
    """``2 BUILDING, 1 SCHEDULED``: how many of ``keys`` are in each state."""
    counts = {}
    for key in keys:
        state = kind.state(found.get(key, {}))
        counts[state] = counts.get(state, 0) + 1
    return ", ".join(f"{n} {state}" for state, n in counts.items())


def _named(kind, keys, found):
    """The first NAMED of ``keys`` with their state and host, and how many more."""
    shown = ", ".join(" ".join(filter(None, (kind.name(k, found.get(k, {})), kind.state(found.get(k, {})),
                                             kind.where(found.get(k, {}))))) for k in keys[:NAMED])
    more = len(keys) - NAMED
    return shown + (f" and {more} more" if more > 0 else "")


def wait_for(client, uuids, timeout, settled=SETTLED, progress=None, **timing):
    """Poll until every instance is in ``settled``; returns {uuid: instance}.

    Each poll asks only for the instances not settled yet, a page at a time."""
    return watch(lambda pending: instances_by_uuid(client, pending), uuids,
                 lambda instance: instance.get("state") in settled, timeout, Kind(), progress, **timing)


def move_settled(migration):
    """Whether a move ended, or a resize waits to be confirmed: its instance ACTIVE, VERIFY_RESIZE
    or ERROR."""
    return migration.get("status") not in (None, moves.MIGRATING)


def wait_for_moves(client, migrations, timeout, names=None, progress=None, interval=None, **timing):
    """Poll until each of ``migrations`` (as the scheduler answered them) ended or, a resize,
    waits to be confirmed; returns {migration id: migration}."""
    by_id = {m["id"]: m for m in migrations}

    def look(pending):
        found = {}
        for uuid in dict.fromkeys(by_id[i]["instance_uuid"] for i in pending):
            found.update((m["id"], m) for m in client.list_migrations({}, instance_uuid=uuid)
                         if m["id"] in by_id)
        return found

    return watch(look, list(by_id), move_settled, timeout, Moves(names), progress,
                 interval=MOVE_INTERVAL if interval is None else interval, known=by_id, **timing)
