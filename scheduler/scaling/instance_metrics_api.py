"""The scheduler's RPC endpoint for per-instance custom metrics (Kubernetes' Pods metrics).

An application, its load balancer or an operator pushes the metrics of an instance
(``berth server metric push``): each is saved as the instance's last sample of that name,
stamped with the database's time, for the scaling groups whose instance metrics name it.
``cpu`` and ``memory`` are not pushed: the agents measure them. Every refusal is an
InvalidRequest saying what is wrong; nothing of a refused push is saved.
"""

from __future__ import annotations

import logging
from typing import Any

from berth_contract import json_checks
from berth_contract.instance_metrics import (
    AGENT_METRICS,
    MAX_PUSHED,
    PUSHED,
    check_pushed_name,
    check_pushed_value,
)
from berth_contract.request_spec import MAX_LIST, parse_uuid
from scheduler import api_versions, rpc, states
from scheduler.db.engine import to_iso
from scheduler.db.instance_metrics import TooManyMetrics
from scheduler.exception import InvalidRequest

LOG = logging.getLogger(__name__)


class InstanceMetricsEndpoint:
    RPC_API = api_versions.SCALING

    def __init__(self, conf: Any, database: Any) -> None:
        self._conf = conf
        self._db = database

    def _live_instance(self, uuid: str, where: str) -> dict[str, Any]:
        instance = self._db.get_instance(uuid)
        if instance is None:
            raise InvalidRequest(f"{where}: no instance {uuid}")
        if instance["state"] == states.DELETED:
            raise InvalidRequest(f"{where}: instance {uuid} is DELETED")
        return instance

    @rpc.callers(rpc.CLIENT)
    def push_instance_metrics(self, context: Any, instance_uuid: Any, metrics: Any) -> dict[str, Any]:
        """Save ``metrics`` ({name: number}) as the instance's newest samples; returns
        ``{instance_uuid, metrics, sampled_at}`` as saved."""
        where = "push_instance_metrics"
        uuid = parse_uuid(instance_uuid, f"{where}: instance_uuid")
        if not isinstance(metrics, dict) or not 0 < len(metrics) <= MAX_PUSHED:
            raise InvalidRequest(f"{where}: metrics must be an object of 1 to {MAX_PUSHED} name: number "
                                 f"entries, got {metrics!r}"[:300])
        values = {}
        for name, value in metrics.items():
            checked = check_pushed_name(name, where)
            values[checked] = check_pushed_value(checked, value, where)
        self._live_instance(uuid, where)
        now = self._db.now()
        limit = self._conf.scaling.max_pushed_metrics
        try:
            saved = self._db.save_instance_metrics(
                [{"instance_uuid": uuid, "name": name, "value": value, "source": PUSHED, "sampled_at": now}
                 for name, value in values.items()], max_pushed=limit)
        except TooManyMetrics as exc:
            raise InvalidRequest(f"{where}: {exc} ([scaling] max_pushed_metrics); nothing saved: push the "
                                 "names it holds, or wait until those not pushed for an hour are pruned"
                                 ) from None
        if not saved:  # DELETED (or archived) since it was looked up
            raise InvalidRequest(f"{where}: instance {uuid} is DELETED")
        LOG.debug("Pushed %s of instance %s", ", ".join(f"{k}={v:g}" for k, v in values.items()), uuid)
        return {"instance_uuid": uuid, "metrics": values, "sampled_at": to_iso(now)}

    @rpc.read_only
    @rpc.callers(rpc.ANYONE)
    def show_instance_metrics(self, context: Any, instance_uuids: Any) -> dict[str, Any]:
        """``{uuid: {name: {value, sampled_at, source}}}``: the samples stored of the instances
        (at most MAX_LIST), however old, at most what an instance may hold (its pushed metrics
        and the agents' cpu and memory; the newest of any more, kept from before a lower
        max_pushed_metrics); an instance without any is left out."""
        where = "show_instance_metrics"
        json_checks.sized_list(instance_uuids, f"{where}: instance_uuids", 1, MAX_LIST, "instance UUIDs")
        uuids = [parse_uuid(u, f"{where}: instance_uuids") for u in instance_uuids]
        return self._db.list_instance_metrics(
            uuids, per_instance=self._conf.scaling.max_pushed_metrics + len(AGENT_METRICS))
