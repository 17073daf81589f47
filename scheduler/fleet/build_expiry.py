"""Builds that never finish: instances SCHEDULED or BUILDING for too long are placed again."""

from __future__ import annotations

import contextlib
import datetime
import logging
from collections.abc import Callable
from typing import Any

from berth_contract.request_spec import RequestSpec, Retry
from scheduler import rpc, states
from scheduler.db.engine import DatabaseUnavailable
from scheduler.exception import InvalidRequest
from scheduler.planning.plan import Job

LOG = logging.getLogger(__name__)


class BuildExpiry:
    """Reschedules (or fails) the instances SCHEDULED or BUILDING for longer than
    ``[scheduler] build_timeout`` without news from their agent.

    The periodic task of every scheduler runs it; a compare-and-set on the
    instance's state and last update makes exactly one of them act.
    """

    def __init__(self, conf: Any, database: Any,
                 reschedule: Callable[[list[Job]], object],
                 terminate: Callable[[dict, str, str, str], None],
                 unit_of_work: Callable[[], Any] = contextlib.nullcontext):
        """``reschedule([Job])`` places instances again (the scheduling path);
        ``terminate(context, host, uuid, reason)`` tells an agent to drop one;
        ``unit_of_work()``: one transaction whose casts go out once it commits (the scheduler's
        UnitOfWork), so that an instance taken back is placed again in the same transaction."""
        self._conf = conf
        self._db = database
        self._reschedule = reschedule
        self._terminate = terminate
        self._unit_of_work = unit_of_work

    def expire(self, now: datetime.datetime | None = None) -> int:
        """Act on every build late at ``now`` (the database's clock by default); returns how many."""
        timeout = self._conf.scheduler.build_timeout
        cutoff = (now or self._db.now()) - datetime.timedelta(seconds=timeout)
        expired = 0
        for instance in self._db.list_instances(states=[states.SCHEDULED, states.BUILDING],
                                                updated_before=cutoff):
            if self._expire(instance, timeout):
                expired += 1
        return expired

    def expire_on_down_hosts(self, hosts: dict[str, str]) -> int:
        """Place again, once, what was cast to ``hosts`` ({host: why it is down}) and not built
        there: their SCHEDULED and BUILDING instances. Their agents, should they start again, ask
        before building (start_build) and drop what was placed elsewhere; returns how many."""
        moved = 0
        for host, why in sorted(hosts.items()):
            for instance in self._db.list_instances(host=host, states=[states.SCHEDULED, states.BUILDING]):
                reason = f"{host}: its host is down ({why}) with the instance {instance['state']}"
                if self._expire(instance, reason, terminate=False):
                    moved += 1
        return moved

    def _expire(self, instance: dict[str, Any], timeout: int | str, terminate: bool = True) -> bool:
        """Take the instance back and place it again, in one transaction: a scheduler stopped
        between the two leaves it as it was, for the next one to take."""
        try:
            with self._unit_of_work():
                return self._take_back(instance, timeout, terminate)
        except rpc.RetryLater as exc:  # the commit met the database away, or lost a race
            raise DatabaseUnavailable(str(exc)) from exc
        except rpc.MessageDeliveryFailure as exc:
            LOG.warning("Instance %s: placed again, but its new host could not be told now (%s); the "
                        "build is sent again once that host reports without it", instance["uuid"], exc)
            return True

    def _take_back(self, instance: dict[str, Any], timeout: int | str, terminate: bool) -> bool:
        uuid, host = instance["uuid"], instance["host"]
        reason = timeout if isinstance(timeout, str) else (
            f"{host}: build timed out ({instance['state']} for more than {timeout} s)")
        taken = self._db.update_instance(
            uuid,
            {"state": states.SCHEDULING},
            expected_states=[instance["state"]],
            expected_updated_at=instance["updated_at"],
        )
        if taken is None:
            return False  # it moved on meanwhile, or another scheduler took it
        ctxt = {"request_id": rpc.new_request_id()}  # of the reschedule and the terminate
        with rpc.handling(ctxt):
            LOG.warning("Instance %s: %s; rescheduling it if attempts remain", uuid, reason)
            try:
                spec = RequestSpec.from_wire(instance["request_spec"], instance["filter_properties"])
            except (InvalidRequest, TypeError) as exc:
                fault = f"{reason}; cannot reschedule it: {exc}"
                self._db.update_instances(
                    [(uuid, {"state": states.ERROR, "fault_reason": fault, "host": None, "node": None})])
            else:
                hosts = [[host, instance.get("node") or host]] if host else []
                spec.retry = Retry(num_attempts=instance.get("attempts") or 1, hosts=hosts, exc_reason=reason,
                                   timed_out=True)
                self._reschedule([Job(ctxt, spec)])
            if host and terminate:
                # Should its agent be alive and slow after all, it must not build it too.
                self._terminate(ctxt, host, uuid, reason)
        return True
