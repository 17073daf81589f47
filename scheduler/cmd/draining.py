"""``berth host drain``'s loop: move every instance off a host, a few at a time.

:class:`Drain` asks the scheduler for one migration per instance, never more than
``max_parallel`` under way, and polls each one's migration until it ends. It knows the
scheduler only through the client's methods, and time only through the ``clock`` and
``sleep`` it is given, so that tests run it against a fake scheduler without waiting.
"""

import logging
import time

from scheduler import rpc, states
from scheduler.db import moves

LOG = logging.getLogger(__name__)

#: The states of the instances a drain moves: ACTIVE ones, and those moving already.
MOVED_STATES = (states.ACTIVE, *states.MOVING)
#: The statuses of a migration that moved its instance, and of one that did not.
MOVED = (moves.COMPLETED, moves.CONFIRMED)
NOT_MOVED = (moves.ERROR, moves.REVERTED)
#: Calls of migrate_instance that time out before an instance counts as not moved.
MAX_TIMEOUTS = 3
#: Seconds between two polls of the moves under way.
POLL_INTERVAL = 1.0


class Drain:
    """Moves the instances of ``host`` elsewhere; :meth:`run` returns the exit status (0: the
    host is empty, 1: some instance stays, 130: interrupted)."""

    def __init__(self, client, host, out, live=False, max_parallel=2, timeout=None, interval=None,
                 clock=time.monotonic, sleep=time.sleep):
        self.client, self.host, self.out = client, host, out
        self.live, self.max_parallel, self.timeout = live, max_parallel, timeout
        self.interval = POLL_INTERVAL if interval is None else interval
        self.clock, self.sleep = clock, sleep
        self.pending = []  # instances not started, in order
        self.under_way = {}  # uuid: (instance, migration)
        self.moved = {}  # uuid: destination
        self.failed = {}  # uuid: reason
        self.timeouts = {}  # uuid: migrate_instance calls that timed out
        self.total = 0
        self.interrupted = False
        self.timed_out = False

    # -- the loop -------------------------------------------------------------------

    def run(self):
        # Asked first: a scheduler without the moves' API refuses before the host is disabled.
        self.client.list_migrations({}, host=self.host, status=moves.MIGRATING)
        found = self.client.admin_call({}, "host_disable", host=self.host, reason="draining")
        print(f"host {found.get('host', self.host)} disabled: draining", file=self.out)
        instances = self.client.list_instances({}, host=self.host)
        self.pending = [i for i in instances if i["state"] in MOVED_STATES]
        self.total = len(self.pending)
        if self.total:
            print(f"moving {self.total} instance(s) off {self.host}, at most {self.max_parallel} at a time",
                  file=self.out)
        deadline = None if self.timeout is None else self.clock() + self.timeout
        while self.under_way or (self.pending and not self.interrupted):
            try:
                if deadline is not None and self.clock() >= deadline:
                    self.timed_out = True
                    break
                self._start_moves()
                if self.under_way:
                    self.sleep(self.interval)
                    self._poll()
            except KeyboardInterrupt:
                if self.interrupted:  # a second Ctrl-C: stop waiting
                    break
                self.interrupted = True
                print(f"interrupted: starting no new move; waiting for the {len(self.under_way)} under way "
                      "(Ctrl-C again to stop waiting)", file=self.out)
        return self.report()

    def _start_moves(self):
        while not self.interrupted and self.pending and len(self.under_way) < self.max_parallel:
            instance = self.pending[0]
            try:
                migration = self._start(instance)
            except KeyboardInterrupt:
                # Asked, or not yet: the scheduler's migrations of the instance say which.
                migration = self._migration_under_way(instance["uuid"])
                if migration is not None:
                    self.pending.pop(0)
                    self.under_way[instance["uuid"]] = (instance, migration)
                raise
            self.pending.pop(0)
            if migration is not None:
                self.under_way[instance["uuid"]] = (instance, migration)

    def _start(self, instance):
        """The migration moving ``instance`` (one under way already, or a new one), or None
        when the scheduler refused to move it (then it failed)."""
        if instance["state"] == states.MIGRATING:
            migration = self._migration_under_way(instance["uuid"])
            if migration is not None:
                return migration
        try:
            return self.client.migrate_instance({}, instance["uuid"], live=self.live)
        except rpc.RemoteError as exc:
            # Refused: perhaps because a call of ours that timed out started its move after all.
            migration = self._migration_under_way(instance["uuid"])
            if migration is not None:
                return migration
            self._failed(instance, exc.value or str(exc))
        except rpc.MessagingTimeout:  # asked, or not: its migrations say which
            migration = self._migration_under_way(instance["uuid"])
            if migration is not None:
                return migration
            # A scheduler that died with the call may hand it to another, which moves it later:
            # asked again at the back of the line, that call is refused and the move found.
            tries = self.timeouts[instance["uuid"]] = self.timeouts.get(instance["uuid"], 0) + 1
            if tries < MAX_TIMEOUTS:
                self.pending.append(instance)
            else:
                self._failed(instance,
                             f"the scheduler did not answer the migrate_instance call ({tries} tries)")
        return None

    def _migration_under_way(self, uuid):
        try:
            found = self.client.list_migrations({}, instance_uuid=uuid, status=moves.MIGRATING)
        except rpc.MessagingException as exc:
            LOG.warning("Could not list the migrations of %s: %s", uuid, exc)
            return None
        return found[0] if found else None

    def _poll(self):
        for uuid, (instance, migration) in list(self.under_way.items()):
            try:
                found = self.client.list_migrations({}, instance_uuid=uuid)
            except rpc.MessagingException as exc:  # asked again at the next poll
                LOG.warning("Could not poll the migration of %s: %s", uuid, exc)
                continue
            now = next((m for m in found if m["id"] == migration["id"]), None)
            if now is None:
                continue
            if now["status"] in MOVED:
                del self.under_way[uuid]
                self.moved[uuid] = now.get("dest_host")
                self._progress(f"moved {_name(instance)} to {now.get('dest_host') or '-'}")
            elif now["status"] in NOT_MOVED:
                del self.under_way[uuid]
                self._failed(instance, now.get("reason") or f"migration {now['id']} ended {now['status']}")

    def _failed(self, instance, reason):
        self.failed[instance["uuid"]] = reason
        self._progress(f"failed to move {_name(instance)}: {reason}")

    def _progress(self, text):
        print(f"{text} ({len(self.moved) + len(self.failed)}/{self.total})", file=self.out)

    # -- the end ---------------------------------------------------------------------

    def report(self):
        """Print what stays on the host, and why; the exit status."""
        left = {uuid: reason for uuid, reason in self.failed.items()}
        for instance, migration in self.under_way.values():
            why = "interrupted" if self.interrupted else f"timed out after {self.timeout} s"
            left[instance["uuid"]] = f"still moving ({why}): migration {migration['id']}"
        for instance in self.pending:
            left[instance["uuid"]] = "not started: " + ("interrupted" if self.interrupted
                                                         else f"timed out after {self.timeout} s")
        if self.interrupted:
            print(f"stopped: {len(self.moved)} moved, {len(left)} not moved", file=self.out)
            self._list(left)
            return 130
        if not self.timed_out:
            for instance in self.client.list_instances({}, host=self.host):
                left.setdefault(instance["uuid"],
                                f"{instance['state']}: only ACTIVE instances are moved")
        if not left:
            print(f"host {self.host} is empty", file=self.out)
            return 0
        print(f"host {self.host} is not empty: {len(left)} instance(s) not moved", file=self.out)
        self._list(left)
        return 1

    def _list(self, left):
        for uuid, reason in left.items():
            print(f"  {uuid}: {reason}", file=self.out)


def _name(instance):
    name = instance.get("display_name")
    return f"{instance['uuid']} ({name})" if name else instance["uuid"]
