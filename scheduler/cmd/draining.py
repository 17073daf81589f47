"""``berth host drain``: start the drain of a host as a job of the schedulers, and watch it.

The scheduler disables the host and starts a job (start_drain, admin API 1.3) that the
schedulers carry on until every instance that was ACTIVE or moving on the host has moved
or failed to, ``max_parallel`` at a time (scheduler.moves.jobs): it goes on whatever becomes of
this command. :class:`Drain` watches it (scheduler.cmd.job_watch), one line per instance;
Ctrl-C leaves it be and says how to watch it again and how to stop it (``--stop``). Run
again while the drain goes on, the command watches the same job.
"""

import time

from scheduler import rpc
from scheduler.cmd.arguments import CommandError
from scheduler.cmd.job_watch import ENDED, Watch

#: What a drain stopped by its timeout says (scheduler.moves.jobs.policy).
TIMED_OUT = "timed out after "


def call(client, method, **kwargs):
    """``method`` of the jobs' API; a cap in [upgrade_levels] below it is refused as a command's error."""
    try:
        return client.admin_call({}, method, **kwargs)
    except rpc.RPCVersionCapError as exc:
        raise CommandError(str(exc)) from None


class Drain:
    """Drains ``host``; :meth:`run` returns the exit status (0: the host is empty, 1: some
    instance stays, 130: Ctrl-C, the drain going on)."""

    def __init__(self, client, host, out, live=False, max_parallel=2, timeout=None, interval=None,
                 sleep=time.sleep, tty=None):
        self.client, self.host, self.out = client, host, out
        self.live, self.max_parallel, self.timeout = live, max_parallel, timeout
        self.interval, self.sleep, self.tty = interval, sleep, tty
        self.job = None
        self.ended = 0  # steps told ended

    def run(self):
        try:
            self.job = call(self.client, "start_drain", host=self.host, live=self.live,
                            max_parallel=self.max_parallel, timeout=self.timeout)
        except KeyboardInterrupt:  # asked, or not: the scheduler's jobs say which
            print(f"interrupted: the drain of {self.host} may have started; watch it: berth host drain "
                  f"{self.host}; stop it: berth host drain {self.host} --stop", file=self.out)
            return 130
        self.host = self.job.get("host") or self.host
        print(f"host {self.host} disabled: draining", file=self.out)
        steps = self.job["steps"]
        if not self.job.get("started", True):
            print(f"drain job {self.job['id']} of host {self.host} is under way already (started "
                  f"{self.job['created_at']}): watching it", file=self.out)
        self.ended = sum(s["status"] in ("done", "failed") for s in steps)
        if steps:
            print(f"moving {len(steps)} instance(s) off {self.host}, at most {self.job['max_parallel']} "
                  "at a time", file=self.out)
        watch = Watch(self.client, self.job, self.out, self._tell, self.interval, self.sleep, self.tty,
                      until=lambda job: (job.get("reason") or "").startswith(TIMED_OUT))
        try:
            self.job = watch.follow()
        except KeyboardInterrupt:
            self.job = watch.job
            return self.detach()
        return self.report()

    def _tell(self, step, before):
        if step["status"] == "running" and step.get("migration_id") is not None:
            return [f"moving {_name(step)} to {step.get('dest_host') or '-'} (migration "
                    f"{step['migration_id']})"]
        if step["status"] not in ("done", "failed"):
            return []
        self.ended += 1
        told = f"({self.ended}/{len(self.job['steps'])})"
        if step["status"] == "done":
            return [f"moved {_name(step)} to {step.get('dest_host') or '-'} {told}"]
        return [f"failed to move {_name(step)}: {step.get('reason')} {told}"]

    def detach(self):
        found = {}
        for step in self.job["steps"]:
            found[step["status"]] = found.get(step["status"], 0) + 1
        print(f"detached: the drain of {self.host} goes on in the scheduler (job {self.job['id']}: "
              f"{found.get('done', 0)} moved, {found.get('failed', 0)} failed, "
              f"{found.get('running', 0) + found.get('pending', 0)} to go)", file=self.out)
        print(f"watch it again: berth host drain {self.host}", file=self.out)
        print(f"stop it: berth host drain {self.host} --stop", file=self.out)
        return 130

    # -- the end ---------------------------------------------------------------------

    def report(self):
        """Print what stays on the host, and why; the exit status."""
        job, reason = self.job, self.job.get("reason") or ""
        timed_out = reason.startswith(TIMED_OUT)
        left = {s["instance_uuid"]: s.get("reason") for s in job["steps"] if s["status"] == "failed"}
        if job["state"] not in ("done",):
            for step in job["steps"]:
                if step["status"] == "running":
                    left[step["instance_uuid"]] = f"still moving ({reason}): migration {step['migration_id']}"
                elif step["status"] == "pending":
                    left[step["instance_uuid"]] = f"not started: {reason}"
            if not timed_out and job["state"] in ENDED:
                print(f"drain of host {self.host} stopped ({reason})", file=self.out)
        if not timed_out:
            for instance in self.client.list_instances({}, host=self.host):
                left.setdefault(instance["uuid"], f"{instance['state']}: only ACTIVE instances are moved")
        if not left:
            print(f"host {self.host} is empty", file=self.out)
            return 0
        print(f"host {self.host} is not empty: {len(left)} instance(s) not moved", file=self.out)
        for uuid, why in left.items():
            print(f"  {uuid}: {why}", file=self.out)
        return 1


def stop(client, host, out):
    """``berth host drain HOST --stop``: the drain of ``host`` starts no new move; those under way
    end on their own."""
    jobs = call(client, "list_jobs", kind="drain", host=host, active=True)
    if not jobs:
        raise CommandError(f"no drain of host {host} is under way")
    job = call(client, "stop_job", job_id=jobs[0]["id"])
    running = sum(s["status"] == "running" for s in job["steps"])
    print(f"drain of host {host} {job['state']}"
          + (f": {running} move(s) under way end on their own" if running else ""), file=out)
    return 0


def _name(step):
    name = step.get("display_name")
    return f"{step['instance_uuid']} ({name})" if name else step["instance_uuid"]
