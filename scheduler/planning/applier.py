"""Committing a Plan: its hosts claimed, its rows written, its builds cast once they commit.

Everything here runs inside the batch's unit of work: the rows go into its
transaction, the casts into its outbox (sent after the commit), and what the
planner consumed in memory is given back should the transaction roll back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from berth_contract.request_spec import RequestSpec, parse_uuid
from scheduler import rpc, states
from scheduler.client import CAST_AT, PLACED_AT
from scheduler.exception import InvalidRequest, NoValidHost
from scheduler.moves.planner import flavor_of
from scheduler.planning import lookups
from scheduler.planning.claims import HostClaims
from scheduler.planning.plan import Build, Placement, Plan, RowUpdate
from scheduler.policy.selection import Decision
from scheduler.telemetry import scheduler_metrics as telemetry

LOG = logging.getLogger(__name__)
#: The compute API from which agents power instances off, on and reboot them.
#: (compute_agent.client.POWER_VERSION, which the planning layer does not import.)
POWER_VERSION = "2.1"


class Applier:
    """Claims hosts for what the planner selects, and commits its plans."""

    def __init__(self, database: Any, hosts: Any, claims: HostClaims, outbox: Any, compute: Any,
                 refusals: Any) -> None:
        self._db = database
        self._hosts = hosts
        self.claims = claims
        self._outbox = outbox
        self._compute = compute
        self._refusals = refusals  # the status page's latest refusals

    def place(self, specs: Sequence[RequestSpec], select: Callable[[RequestSpec], list[Placement]]
              ) -> list[list[Placement] | NoValidHost]:
        """For each spec, its placements chosen by ``select`` and claimed in the database (other
        schedulers placing on the same hosts meanwhile are learnt and placed around); or the
        NoValidHost that says why not."""
        return self.claims.place(specs, telemetry.timed(select))

    def commit(self, plan: Plan) -> None:
        """Write what ``plan`` decided and cast its builds once the transaction commits. A row
        another worker wrote first (a request or a reschedule delivered twice) is left as it left
        it: its placement here is given back, and its build not sent."""
        now = self._db.now()
        self._db.update_instances([(u, {"state": states.DELETED, "deleted_at": now}) for u in plan.deleted])
        for spec in plan.group_members:
            lookups.add_members(self._db, spec)
        self.send_builds(plan.resends)
        for refusal in plan.refusals:
            if refusal.removed:
                self._outbox.send(telemetry.count_refusal, refusal.removed)
            self._outbox.send(telemetry.count_outcome, refusal.outcome, len(refusal.spec.instance_uuids))
            uuids = refusal.spec.instance_uuids
            self._outbox.send(self._refusals.add, instances=list(uuids), reason=refusal.reason,
                              names=[refusal.spec.display_names.get(u) for u in uuids])
        for invalid in plan.invalid:
            spec = invalid.job.spec
            if invalid.recorded and spec.uuids_named:
                self._outbox.send(telemetry.count_outcome, telemetry.ERROR, len(spec.instance_uuids))
        taken = self._create(plan.creates)
        taken.update(self._update(plan.updates))
        scheduled = telemetry.Scheduled()
        sent = []
        for build in rpc.each_request(plan.builds, lambda build: build.context):
            if build.instance_uuid not in taken:
                log_decision(build.instance_uuid, build.host, build.decision, build.spec.retry.num_attempts)
                sent.append(build)
                scheduled.add(build.spec.retry.num_attempts, (build.context or {}).get(CAST_AT))
        self.send_builds(sent)
        if scheduled:
            self._outbox.send(scheduled.count)

    def refuse_unread(self, request_spec: Any, reason: str, request_id: str | None = None) -> None:
        """Record the refusal of a request that could not be read on the instances it names, so
        that their owner can see it. Only instances this request creates: a bad message naming
        an existing instance must not change it."""
        uuids = request_spec.get("instance_uuids") if isinstance(request_spec, dict) else None
        valid = []
        for i, value in enumerate(uuids if isinstance(uuids, list) else []):
            try:
                valid.append(parse_uuid(value, f"instance_uuids[{i}]"))
            except InvalidRequest:
                continue
        if valid:
            created = self._db.create_instances(
                [{"uuid": u, "state": states.ERROR, "fault_reason": reason,
                  "request_id": request_id} for u in valid])
            self._outbox.send(telemetry.count_outcome, telemetry.ERROR, len(created))

    def send_builds(self, builds: Sequence[Build]) -> None:
        """Cast ``builds`` to their agents once the transaction commits, those to one host together
        (ComputeClient.run_instances)."""
        if not builds:
            return
        placed_at = time.time()
        casts = []
        for build in builds:
            instance = {"uuid": build.instance_uuid, "flavor": build.spec.flavor.to_wire(),
                        "project_id": build.spec.project_id}
            context = context_values(build.context)  # a copy of its own
            context[PLACED_AT] = placed_at
            casts.append((context, build.host, instance, build.request_spec, build.filter_properties))
        self._outbox.send(self._compute.run_instances, casts)

    def send_build_again(self, context: Any, instance_uuid: str) -> bool:
        """Cast again the build of an instance SCHEDULED on its host, from its row, stamped as placed
        long ago: its agent asks before building it (start_build), lest it was placed elsewhere
        meanwhile. False when it is no longer SCHEDULED."""
        row = self._db.get_instance(instance_uuid)
        if row is None or row["state"] != states.SCHEDULED or not row["host"]:
            return False
        instance = {"uuid": instance_uuid, "flavor": flavor_of(row).to_wire(),
                    "project_id": row.get("project_id")}
        self._outbox.send(self._compute.run_instance, dict(context_values(context), **{PLACED_AT: 0}),
                          row["host"], instance, row["request_spec"], row["filter_properties"])
        return True

    def terminate(self, context: Any, host: str, instance_uuid: str, reason: str) -> None:
        """Tell ``host``'s agent to drop an instance, and why, once the transaction commits."""
        self._outbox.send(self._compute.terminate_instance, context, host, instance_uuid, reason)

    def can_power(self) -> str | None:
        """None when the agents may be told to power instances (compute API 2.1), else why not."""
        if self._compute.can_send_version(POWER_VERSION):
            return None
        return (f"[upgrade_levels] compute caps this scheduler below {POWER_VERSION}, the compute API that "
                "powers instances (agents of the previous release run)")

    def power(self, context: Any, host: str, instance_uuid: str, action: str, hard: bool = False) -> None:
        """Tell ``host``'s agent to power the instance off, on or to reboot it (``action``: one of
        compute_agent.client.POWER_ACTIONS), once the transaction commits."""
        self._outbox.send(self._compute.power, context, host, instance_uuid, action, hard)

    def _create(self, rows: list[dict[str, Any]]) -> dict[str, str | None]:
        """Insert the rows of new instances; {uuid: host} of those another worker inserted first."""
        created = set(self._db.create_instances(rows))
        taken = {row["uuid"]: row.get("host") for row in rows if row["uuid"] not in created}
        if taken:
            LOG.info("Instances %s were scheduled by another worker meanwhile", ", ".join(sorted(taken)))
            self._give_back(taken.items())
        return taken

    def _update(self, updates: list[RowUpdate]) -> dict[str, str | None]:
        """Write placements or refusals of instances that have a row, each only if the row is still
        as read; {uuid: host} of those another worker changed meanwhile."""
        if not updates:
            return {}
        done = self._db.update_instances_if([(u.instance_uuid, u.values, u.expected) for u in updates])
        taken = {u.instance_uuid: u.values.get("host") for u in updates if u.instance_uuid not in done}
        if taken:
            LOG.info("Instances %s were changed by another worker meanwhile; left as it left them",
                     ", ".join(sorted(taken)))
            self._give_back(taken.items())
        return taken

    def _give_back(self, placed: Iterable[tuple[str, str | None]]) -> None:
        with self._hosts.lock:
            for instance_uuid, host in placed:
                if host is not None:
                    self._hosts.release(host, instance_uuid)


def context_values(context: Any) -> dict[str, Any]:
    """The caller's context values, to pass on with the casts its request causes."""
    return context.to_dict() if hasattr(context, "to_dict") else dict(context or {})


def _hosts(count: int) -> str:
    return f"{count} host{'s' if count != 1 else ''}"


def log_decision(instance_uuid: str, host: str, decision: Decision | None, attempt: int = 1,
                 verb: str = "Placed") -> None:
    """One INFO line per instance: where it goes and out of how many hosts; at DEBUG, what each
    filter left and the heaviest hosts."""
    again = f"attempt {attempt}; " if attempt > 1 else ""
    if decision is None:
        LOG.info("%s instance %s on host %s", verb, instance_uuid, host)
    elif decision.looked is not None and decision.looked < decision.considered:
        LOG.info("%s instance %s on host %s (%s%s considered; the filters ran on the %s with the most "
                 "%s, %d passed)", verb, instance_uuid, host, again, _hosts(decision.considered),
                 _hosts(decision.looked), decision.ranked_by, decision.passed)
    elif decision.forced:
        LOG.info("%s instance %s on host %s (%sforced: %s considered, no filter run)", verb, instance_uuid,
                 host, again, _hosts(decision.considered))
    else:
        LOG.info("%s instance %s on host %s (%s%s considered, %d passed the filters)", verb, instance_uuid,
                 host, again, _hosts(decision.considered), decision.passed)
    if decision is not None and decision.top and LOG.isEnabledFor(logging.DEBUG):
        LOG.debug("Instance %s: of %s, %s; heaviest: %s", instance_uuid, _hosts(decision.considered),
                  ", ".join(f"{name} left {left}" for name, left in decision.filters) or "no filter run",
                  ", ".join(f"{name} {weight:.3f}" for name, weight in decision.top))
