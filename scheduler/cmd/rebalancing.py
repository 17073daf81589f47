"""``berth rebalance apply``: start applying a plan as a job of the schedulers, and watch it.

The scheduler starts a job (apply_rebalance_plan, admin API 1.3) that the schedulers carry
on until the plan is done or stops (scheduler.moves.jobs): each step checked and started as
start_rebalance_step does, ``max_parallel`` at a time, the plan stopping at the first step
that fails. It goes on whatever becomes of this command, which watches it
(scheduler.cmd.job_watch): ``berth rebalance show`` tells its progress from anywhere,
``berth rebalance stop`` (or ``apply --stop``) stops it, and Ctrl-C leaves it be.
"""

import time

from scheduler import rpc
from scheduler.cmd.draining import call
from scheduler.cmd.job_watch import Watch

ENDED = ("done", "stopped")


class Apply:
    """Applies plan ``plan_id``; :meth:`run` returns the exit status (0: every step done, 1: the
    plan stopped, 130: Ctrl-C, the plan going on)."""

    def __init__(self, client, plan_id, out, max_parallel=2, interval=None, sleep=time.sleep, tty=None):
        self.client, self.plan_id, self.out = client, plan_id, out
        self.max_parallel = max_parallel
        self.interval, self.sleep, self.tty = interval, sleep, tty
        self.job = None

    def _plan(self):
        return call(self.client, "show_rebalance_plan", plan_id=self.plan_id)

    def run(self):
        plan = self._plan()
        if plan["state"] in ENDED:
            print(f"rebalance plan {plan['id']} is {plan['state']}" + _why(plan), file=self.out)
            return 0 if plan["state"] == "done" else 1
        try:
            self.job = call(self.client, "apply_rebalance_plan", plan_id=self.plan_id,
                            max_parallel=self.max_parallel)
        except rpc.RemoteError as exc:
            if exc.exc_type != "MoveRefused":
                raise
            return self.report()  # stopping, with no job to watch: as far as it went
        except KeyboardInterrupt:
            print(f"interrupted: rebalance plan {self.plan_id} may be being applied; watch it: "
                  f"berth rebalance apply {self.plan_id}; stop it: berth rebalance stop {self.plan_id}",
                  file=self.out)
            return 130
        pending = sum(s["status"] == "pending" for s in self.job["steps"])
        if self.job.get("started", True):
            print(f"applying rebalance plan {self.plan_id}: {pending} step(s) to start, at most "
                  f"{self.job['max_parallel']} at a time", file=self.out)
        else:
            print(f"rebalance plan {self.plan_id} is being applied already (job {self.job['id']}, "
                  f"{pending} step(s) to start): watching it", file=self.out)
        watch = Watch(self.client, self.job, self.out, self._tell, self.interval, self.sleep, self.tty)
        try:
            self.job = watch.follow()
        except KeyboardInterrupt:
            print(f"detached: rebalance plan {self.plan_id} goes on in the scheduler (job {self.job['id']})",
                  file=self.out)
            print(f"watch it again: berth rebalance apply {self.plan_id}", file=self.out)
            print(f"stop it: berth rebalance stop {self.plan_id}", file=self.out)
            return 130
        return self.report()

    def _tell(self, step, before):
        lines = []
        if before == "pending" and step.get("migration_id") is not None:
            lines.append(f"step {step['position']}: moving {named(step)} from "
                         f"{step['source_host']} to {step['dest_host']} (migration {step['migration_id']})")
        if step["status"] == "done":
            lines.append(f"step {step['position']} moved {named(step)} to {step['dest_host']}")
        elif step["status"] == "failed":
            verb = "failed" if step.get("migration_id") is not None else "refused"
            lines.append(f"step {step['position']} {verb}: {step.get('reason')}")
        return lines

    def report(self):
        plan = self._plan()
        found = {}
        for step in plan["steps"]:
            found[step["status"]] = found.get(step["status"], 0) + 1
        figures = ", ".join(f"{n} {status}" for status, n in sorted(found.items()))
        print(f"rebalance plan {plan['id']} {plan['state']}: {figures or 'no step'}" + _why(plan),
              file=self.out)
        return 0 if plan["state"] == "done" else 1


def named(step):
    """The instance of ``step``: its UUID, and its name when it has one."""
    name = step.get("display_name")
    return f"{step['instance_uuid']} ({name})" if name else step["instance_uuid"]


def _why(plan):
    return f" ({plan['reason']})" if plan.get("reason") and plan["state"] != "done" else ""
