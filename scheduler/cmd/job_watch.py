"""Watching a job the schedulers carry on (``berth host drain``, ``berth rebalance apply``).

The job runs in the schedulers (scheduler.moves.jobs): the command only starts it and watches it,
asking for it (show_job) every POLL_INTERVAL and telling each step that changed, one line
a step; on a terminal a progress bar stays below those lines. Ctrl-C leaves the job be
(:class:`Watch` lets KeyboardInterrupt through for the command to say how to watch it
again and how to stop it). Time comes only through the ``sleep`` it is given, so that
tests watch a fake scheduler without waiting.
"""

import logging
import time

from scheduler import rpc
from scheduler.cmd.waiting import Progress

LOG = logging.getLogger(__name__)

#: Seconds between two looks at the job.
POLL_INTERVAL = 1.0
#: The states of a job that ended.
ENDED = ("done", "stopped")
BAR_WIDTH = 24


def counts(job):
    """{status: steps} of the job's steps."""
    found = {}
    for step in job["steps"]:
        found[step["status"]] = found.get(step["status"], 0) + 1
    return found


def bar(job):
    """The progress bar of ``job``: its steps ended of all, what is under way and to start."""
    found, total = counts(job), len(job["steps"])
    ended = found.get("done", 0) + found.get("failed", 0)
    filled = BAR_WIDTH * ended // total if total else BAR_WIDTH
    parts = [f"{found.get('done', 0)} done"]
    if found.get("failed"):
        parts.append(f"{found['failed']} failed")
    parts += [f"{found.get('running', 0)} under way", f"{found.get('pending', 0)} to start"]
    return f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {ended}/{total}: {', '.join(parts)}"


class Watch:
    """Follows ``job`` until it ends or ``until(job)`` says: ``tell(step, before)`` gives the
    lines to print for a step whose status went from ``before`` to the one it has now."""

    def __init__(self, client, job, out, tell, interval=None, sleep=time.sleep, tty=None, until=None):
        self.client, self.job, self.out, self.tell = client, job, out, tell
        self.interval = POLL_INTERVAL if interval is None else interval
        self.sleep = sleep
        self.progress = Progress(out, tty)  # the bar, on a terminal
        self.until = until
        self.seen = {s["position"]: s["status"] for s in job["steps"]}
        self._unanswered = False

    def follow(self):
        """Tell each step's change until the job ends (or ``until``); the job as last seen."""
        try:
            while self.job["state"] not in ENDED and not (self.until and self.until(self.job)):
                self.progress.status(bar(self.job))
                self.out.flush()  # each line as it happens, to a pipe or a file too
                self.sleep(self.interval)
                self._look()
        finally:
            self.progress.clear()
        return self.job

    def _look(self):
        try:
            job = self.client.admin_call({}, "show_job", job_id=self.job["id"])
        except rpc.MessagingTimeout as exc:  # a scheduler or the broker restarting: the job goes on
            if not self._unanswered:
                LOG.warning("No scheduler answered show_job (%s); asking again", exc)
            self._unanswered = True
            return
        self._unanswered = False
        self.job = job
        for step in job["steps"]:
            before = self.seen.get(step["position"])
            if step["status"] != before:
                self.seen[step["position"]] = step["status"]
                self.print(*self.tell(step, before))

    def print(self, *lines):
        self.progress.clear()
        for line in lines:
            print(line, file=self.out)
