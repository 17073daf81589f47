"""``berth rebalance apply``'s loop: start a plan's steps, a few at a time, until it ends or stops.

Like a drain (scheduler.cmd.draining), it runs in the command: the scheduler checks and starts
each step (start_rebalance_step) and records how far the plan went, so that ``berth rebalance
show`` tells progress from anywhere, ``berth rebalance stop`` stops it from another terminal,
and running ``apply`` again goes on with the steps still pending. Time comes only through the
``sleep`` it is given, so that tests run it against a fake scheduler without waiting.
"""

import time

from scheduler import rpc

#: Seconds between two looks at the steps under way.
POLL_INTERVAL = 1.0
ENDED = ("done", "stopped")


class Apply:
    """Applies plan ``plan_id``; :meth:`run` returns the exit status (0: every step done, 1: the
    plan stopped, 130: interrupted)."""

    def __init__(self, client, plan_id, out, max_parallel=2, interval=None, sleep=time.sleep):
        self.client, self.plan_id, self.out = client, plan_id, out
        self.max_parallel = max_parallel
        self.interval = POLL_INTERVAL if interval is None else interval
        self.sleep = sleep
        self.seen = {}  # position: the status last printed
        self.holding = False  # start no new step
        self.interrupted = False

    def _plan(self):
        return self.client.admin_call({}, "show_rebalance_plan", plan_id=self.plan_id)

    def run(self):
        plan = self._plan()
        self.seen = {s["position"]: s["status"] for s in plan["steps"]}
        if plan["state"] in ENDED:
            print(f"rebalance plan {plan['id']} is {plan['state']}" + _why(plan), file=self.out)
            return 0 if plan["state"] == "done" else 1
        pending = sum(s["status"] == "pending" for s in plan["steps"])
        print(f"applying rebalance plan {plan['id']}: {pending} step(s) to start, at most "
              f"{self.max_parallel} at a time", file=self.out)
        while True:
            try:
                plan = self._plan()
                self._progress(plan)
                if plan["state"] != "applying" and plan["state"] != "planned":
                    self.holding = True
                running = [s for s in plan["steps"] if s["status"] == "running"]
                pending = [s for s in plan["steps"] if s["status"] == "pending"]
                if not self.holding:
                    for step in pending[:max(0, self.max_parallel - len(running))]:
                        if not self._start(step):
                            break
                        running.append(step)
                if not running and (self.holding or not pending):
                    break
                self.sleep(self.interval)
            except KeyboardInterrupt:
                if self.interrupted:  # a second Ctrl-C: stop waiting
                    break
                self.interrupted = self.holding = True
                print("interrupted: starting no new step; waiting for those under way (Ctrl-C again to stop "
                      f"waiting; berth rebalance apply {self.plan_id} goes on later)", file=self.out)
        return self.report()

    def _start(self, step):
        try:
            started = self.client.admin_call({}, "start_rebalance_step", plan_id=self.plan_id,
                                             position=step["position"])
        except rpc.RemoteError as exc:  # the plan is stopped, or the step started already
            return self._hold(step, exc.value or str(exc))
        if "refused" in started:
            return self._hold(step, started["refused"])
        self.seen[step["position"]] = "running"
        print(f"step {step['position']}: moving {step['instance_uuid']} from {step['source_host']} to "
              f"{step['dest_host']} (migration {started['migration']['id']})", file=self.out)
        return True

    def _hold(self, step, why):
        print(f"step {step['position']} refused: {why}", file=self.out)
        self.seen[step["position"]] = "failed"
        self.holding = True
        return False

    def _progress(self, plan):
        for step in plan["steps"]:
            before = self.seen.get(step["position"])
            if step["status"] != before and step["status"] in ("done", "failed"):
                self.seen[step["position"]] = step["status"]
                what = (f"moved {step['instance_uuid']} to {step['dest_host']}" if step["status"] == "done"
                        else f"failed: {step.get('failure')}")
                print(f"step {step['position']} {what}", file=self.out)

    def report(self):
        plan = self._plan()
        self._progress(plan)
        counts = {}
        for step in plan["steps"]:
            counts[step["status"]] = counts.get(step["status"], 0) + 1
        figures = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        print(f"rebalance plan {plan['id']} {plan['state']}: {figures or 'no step'}" + _why(plan),
              file=self.out)
        if self.interrupted:
            return 130
        return 0 if plan["state"] == "done" else 1


def _why(plan):
    return f" ({plan['reason']})" if plan.get("reason") and plan["state"] != "done" else ""
