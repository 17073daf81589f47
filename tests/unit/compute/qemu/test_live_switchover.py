"""A live migration paused before its switch-over is continued once: qemu may say pre-switchover
for a moment after migrate-continue, and a second migrate-continue then fails the migration (the
guests suite saw "Migration not in expected state: device" on a loaded machine)."""

import contextlib
import types

from compute_agent.driver.qemu import live_migration


class Monitor:
    """query-migrate answers in turn; migrate-continue refused once the migration moved on."""

    def __init__(self, statuses):
        self.statuses = list(statuses)
        self.continued = 0

    def execute(self, command, **arguments):
        if command == "query-migrate":
            return {"status": self.statuses.pop(0)}
        if command == "migrate-continue":
            self.continued += 1
            if self.continued > 1:
                raise RuntimeError("GenericError: Migration not in expected state: device")
            return {}
        return []  # query-block-jobs, query-named-block-nodes: no mirror, no target


def test_a_migration_still_said_pre_switchover_after_it_was_continued_is_not_continued_again(monkeypatch):
    monitor = Monitor(["active", "pre-switchover", "pre-switchover", "device", "completed"])
    monkeypatch.setattr(live_migration.qmp, "QMP", lambda path: contextlib.nullcontext(monitor))
    driver = types.SimpleNamespace(_end_mirror=lambda m, uuid: None, _wait=lambda seconds: None)
    files = types.SimpleNamespace(qmp="qmp.sock")
    info = live_migration.LiveMigration._until_migrated(driver, files, "u1", "tcp:127.0.0.1:1")
    assert info == {"status": "completed"} and monitor.continued == 1
