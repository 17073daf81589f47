"""The schedulers' RPC APIs, as an API service, an agent or the CLI calls them.

Three APIs share the topic ``scheduler`` (scheduler.api_versions): the scheduler's, the
operators' (admin) and the scaling groups'. Each method sends the oldest version of its
API that carries what it sends, under that API's cap in ``[upgrade_levels]`` of the
transport's configuration.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from berth_contract.versions import API
from scheduler import api_versions, rpc
from scheduler.conf import upgrade_levels
from scheduler.rpc.client import ConsumerCheck, Context
from scheduler.rpc.gathered import GatheredCasts

TOPIC = "scheduler"
#: The topic of the agents' reports: cast to its fanout exchange (``scheduler_reports_fanout``),
#: from API 1.2 (see scheduler.fleet.report_digests).
REPORTS_TOPIC = f"{TOPIC}_reports"
#: The version of the scheduler API from which reports go to REPORTS_TOPIC.
REPORTS_VERSION = "1.2"
#: The context key of a run_instance cast's wall-clock time (seconds since the epoch), from
#: which the scheduler measures the time to SCHEDULED; callers that leave it out are not timed.
CAST_AT = "berth_cast_at"
#: The context key of a build cast to an agent that says when (the scheduler's time.time()) it was
#: placed: an agent asks before building one placed before it last began consuming (start_build).
PLACED_AT = "berth_placed_at"
#: The version of the scheduler API from which its servers take bundles of casts.
BUNDLES_VERSION = "1.3"
#: The version of the scheduler API from which a report may say its agent stopped, and agents
#: ask before a build (start_build).
HOST_STOPS_VERSION = "1.4"
#: The version of the scheduler API from which agents say the steps of a move between two agents.
MOVE_STEPS_VERSION = "1.5"
#: The version of the scheduler API from which it stops, starts and reboots instances, and agents
#: may report SHUTOFF.
POWER_VERSION = "1.6"
#: The version of the scheduler API from which agents may report SHUTOFF an ACTIVE instance whose
#: guest powered itself off (with a fault saying so).
GUEST_SHUTDOWN_VERSION = "1.7"
#: The version of the scheduler API from which move_update carries a migration's figures.
MOVE_FIGURES_VERSION = "1.8"
#: The topic of the agents' words on their instances and moves (AGENT_METHODS), from API 1.9: a
#: queue of its own, which every scheduler takes besides TOPIC's, so that they do not wait behind
#: the clients' requests queued there.
AGENTS_TOPIC = f"{TOPIC}_agents"
#: The version of the scheduler API from which the agents send AGENT_METHODS to AGENTS_TOPIC.
AGENTS_VERSION = "1.9"
#: What the agents tell the schedulers of their instances and moves, and ask before a build.
AGENT_METHODS = frozenset({"instance_update", "start_build", "move_update"})
#: The methods of the scaling API admin_call may name; every other one is the admin API's.
SCALING_METHODS = frozenset({
    "create_scaling_group", "list_scaling_groups", "show_scaling_group", "update_scaling_group",
    "pause_scaling_group", "resume_scaling_group", "delete_scaling_group",
    "push_instance_metrics", "show_instance_metrics",
})
#: The methods of the admin API that came with its version 1.1.
FLAVOR_METHODS = frozenset({
    "create_flavor", "list_flavors", "show_flavor", "set_flavor_properties", "unset_flavor_properties",
    "delete_flavor",
})
#: The methods of the admin API that came with its version 1.2.
REBALANCE_METHODS = frozenset({
    "plan_rebalance", "list_rebalance_plans", "show_rebalance_plan", "start_rebalance_step",
    "stop_rebalance_plan",
})
#: The methods of the admin API that came with its version 1.3.
JOB_METHODS = frozenset({"start_drain", "apply_rebalance_plan", "show_job", "list_jobs", "stop_job"})


class SchedulerClient:
    def __init__(self, transport: Any, timeout: float | None = None, check_consumers: bool = False,
                 notice: Callable[[str], None] | None = None, require_queue: bool = False):
        """``check_consumers``: the first call fails at once with NoConsumer when the broker
        says no scheduler consumes its queue, and ``notice`` is told when a first call the
        broker could not count waits (rpc.client.ConsumerCheck). ``require_queue``: a cast to
        the schedulers' queue raises NoQueue when it does not exist (no scheduler has run on
        this vhost and exchange), where the broker would drop it (rpc.RPCClient)."""
        check = ConsumerCheck(notice) if check_consumers else None
        self.transport = transport  # the CLI reaches the compute agents over it too
        self._clients = {api.name: rpc.RPCClient(transport, rpc.Target(topic=TOPIC), timeout=timeout,
                                                 version_cap=upgrade_levels.cap(transport.conf, api),
                                                 api=api.name, consumer_check=check,
                                                 require_queue=require_queue)
                         for api in (api_versions.SCHEDULER, api_versions.ADMIN, api_versions.SCALING)}
        self._client = self._clients[api_versions.SCHEDULER.name]
        self._fanout = self._client.prepare(fanout=True)
        self._run_instance = (GatheredCasts(self._client, "run_instance", BUNDLES_VERSION)
                              if self._client.can_send_version(BUNDLES_VERSION) else None)
        self._admin_fanout = self._clients[api_versions.ADMIN.name].prepare(fanout=True)
        self._reports = rpc.RPCClient(
            transport, rpc.Target(topic=REPORTS_TOPIC, fanout=True, version=REPORTS_VERSION),
            version_cap=self._client.version_cap, api=api_versions.SCHEDULER.name)
        #: Where the agents' AGENT_METHODS go: their own queue, or under a cap below 1.9 (schedulers
        #: that do not take it) the clients' one.
        self._agents = self._client
        #: An agent's instance_update from its builds' threads, gathered as run_instance is.
        self._updates = None
        if self._client.can_send_version(AGENTS_VERSION):
            self._agents = rpc.RPCClient(transport, rpc.Target(topic=AGENTS_TOPIC), timeout=timeout,
                                         version_cap=self._client.version_cap,
                                         api=api_versions.SCHEDULER.name)
            self._updates = GatheredCasts(self._agents, "instance_update", BUNDLES_VERSION)

    def can_send_version(self, version: str, api: API = api_versions.SCHEDULER) -> bool:
        """Whether ``[upgrade_levels]`` lets this client send ``version`` of ``api``."""
        return self._clients[api.name].can_send_version(version)

    def run_instance(self, ctxt: Context, request_spec: dict, filter_properties: dict) -> None:
        """Cast run_instance: returns once the broker has it. The casts of other threads that come
        while one is being published go together in the next message, a bundle (API 1.3: not under a
        lower cap), each returning once it is confirmed (rpc.gathered)."""
        values = dict(ctxt or {}) if isinstance(ctxt, dict) or ctxt is None else ctxt.to_dict()
        values[CAST_AT] = time.time()
        if self._run_instance is None:
            self._client.cast(
                values, "run_instance", request_spec=request_spec, filter_properties=filter_properties
            )
        else:
            self._run_instance.cast(values, request_spec=request_spec, filter_properties=filter_properties)

    def run_instances(self, requests: Sequence[tuple[Context, dict, dict]]) -> None:
        """Cast run_instance once per ``(context, request_spec, filter_properties)`` of
        ``requests``, each a request of its own, bundled (API 1.3) unless the cap is lower."""
        calls = []
        for ctxt, request_spec, filter_properties in requests:
            values = dict(ctxt or {}) if isinstance(ctxt, dict) or ctxt is None else ctxt.to_dict()
            values[CAST_AT] = time.time()
            calls.append((values, {"request_spec": request_spec, "filter_properties": filter_properties}))
        self._client.cast_each("run_instance", calls, bundled_from=BUNDLES_VERSION)

    def select_destinations(self, ctxt: Context, request_spec: dict, filter_properties: dict
                            ) -> list[dict[str, Any]]:
        return self._client.call(
            ctxt,
            "select_destinations",
            request_spec=request_spec,
            filter_properties=filter_properties,
        )

    def report_resources(self, ctxt: Context, host: str, resources: dict) -> None:
        """Cast a host's report to every scheduler: to the reports' exchange, or with
        ``[upgrade_levels] scheduler`` below 1.2 (schedulers that predate it) to scheduler_fanout."""
        if self._reports.can_send_version():
            self._reports.cast(ctxt, "report_resources", host=host, resources=resources)
        else:
            self._fanout.cast(ctxt, "report_resources", host=host, resources=resources)

    def report_stopped(self, ctxt: Context, host: str, resources: dict) -> bool:
        """Cast a host's last report, ``resources`` with ``stopped``, as its agent stops cleanly: every
        scheduler takes the host for down at once. False, and nothing sent, with ``[upgrade_levels]
        scheduler`` below 1.4 (schedulers that would take it for a report like any other)."""
        if not self._reports.can_send_version(HOST_STOPS_VERSION):
            return False
        self._reports.prepare(version=HOST_STOPS_VERSION).cast(
            ctxt, "report_resources", host=host, resources=dict(resources, stopped=True))
        return True

    def aggregates_changed(self, ctxt: Context, by: str) -> None:
        """Tell every scheduler to reload the aggregates (``by``: the scheduler that changed them)."""
        self._admin_fanout.cast(ctxt, "aggregates_changed", by=by)

    def hosts_changed(self, ctxt: Context, by: str, deleted: list[str]) -> None:
        """Tell every scheduler to reload the disabled hosts and forget the ``deleted`` ones."""
        self._admin_fanout.cast(ctxt, "hosts_changed", by=by, deleted=deleted)

    def instance_update(self, ctxt: Context, instance_uuid: str, host: str, state: str,
                        fault: dict | None = None) -> None:
        """The instance's new state on ``host``, from its agent; SHUTOFF at 1.6 (under a lower cap at
        1.0: only a scheduler of 1.6 casts a stop, and it takes SHUTOFF whatever the version said),
        the others at 1.0, and those of other threads that come while one is published (an agent's
        builds end together) in one bundle to the agents' queue (1.9, rpc.gathered)."""
        shutoff = state == "SHUTOFF" and self._client.can_send_version(POWER_VERSION)
        if not shutoff and self._updates is not None:
            self._updates.cast(ctxt, instance_uuid=instance_uuid, host=host, state=state, fault=fault)
            return
        version = GUEST_SHUTDOWN_VERSION if shutoff and fault is not None else POWER_VERSION
        client = self._agents.prepare(version=version) if shutoff else self._agents
        client.cast(
            ctxt, "instance_update", instance_uuid=instance_uuid, host=host, state=state, fault=fault
        )

    def hears_guests_shut_down(self) -> bool:
        """Whether the schedulers take SHUTOFF, with a fault, of an ACTIVE instance whose guest
        powered itself off (1.7): not under a lower cap ([upgrade_levels] scheduler)."""
        return self._client.can_send_version(GUEST_SHUTDOWN_VERSION)

    def start_build(self, ctxt: Context, instance_uuid: str, host: str, timeout: float | None = None
                    ) -> dict[str, Any]:
        """(1.4) From ``host``'s agent, before it builds: ``{"build": True}``, or ``{"build": False,
        "reason": ...}`` when the instance was placed elsewhere meanwhile (or deleted)."""
        return self._agents.prepare(version=HOST_STOPS_VERSION, timeout=timeout).call(
            ctxt, "start_build", instance_uuid=instance_uuid, host=host)

    def delete_instance(self, ctxt: Context, instance_uuid: str) -> None:
        self._client.cast(ctxt, "delete_instance", instance_uuid=instance_uuid)

    def list_hosts(self, ctxt: Context) -> list[dict[str, Any]]:
        return self._client.call(ctxt, "list_hosts")

    def list_instances(self, ctxt: Context, host: str | None = None, state: str | None = None,
                       include_deleted: bool = False, uuids: Iterable[str] | None = None,
                       name: str | None = None) -> list[dict[str, Any]]:
        # uuids and name only when given: a scheduler that predates them still answers the rest.
        extra: dict[str, Any] = {} if uuids is None else {"uuids": list(uuids)}
        if name is not None:
            extra["name"] = name
        return self._client.call(
            ctxt, "list_instances", host=host, state=state, include_deleted=include_deleted, **extra
        )

    def show_instance(self, ctxt: Context, instance_uuid: str) -> dict[str, Any]:
        return self._client.call(ctxt, "show_instance", instance_uuid=instance_uuid)

    # -- an instance's power (API 1.6) ------------------------------------------

    def stop_instance(self, ctxt: Context, instance_uuid: str) -> dict[str, Any]:
        """Power the ACTIVE instance off (SHUTOFF, its claim kept): the instance, POWERING_OFF."""
        return self._client.prepare(version=POWER_VERSION).call(ctxt, "stop_instance",
                                                                instance_uuid=instance_uuid)

    def start_instance(self, ctxt: Context, instance_uuid: str) -> dict[str, Any]:
        """Power the SHUTOFF instance on: the instance, POWERING_ON."""
        return self._client.prepare(version=POWER_VERSION).call(ctxt, "start_instance",
                                                                instance_uuid=instance_uuid)

    def reboot_instance(self, ctxt: Context, instance_uuid: str, hard: bool = False) -> dict[str, Any]:
        """Reboot the ACTIVE instance (``hard``: a reset, not asked of its guest): the instance,
        REBOOTING."""
        return self._client.prepare(version=POWER_VERSION).call(ctxt, "reboot_instance",
                                                                instance_uuid=instance_uuid, hard=hard)

    # -- moves (API 1.1) --------------------------------------------------------

    def _moves(self) -> Any:
        return self._client.prepare(version="1.1")

    def migrate_instance(self, ctxt: Context, instance_uuid: str, host: str | None = None,
                         force: bool = False, live: bool = False) -> dict[str, Any]:
        """Move the instance to a host the filters and weighers choose, its own left out; to
        ``host`` if given (checked by the filters unless ``force``). The migration started."""
        return self._moves().call(ctxt, "migrate_instance", instance_uuid=instance_uuid, host=host,
                                  force=force, live=live)

    def resize_instance(self, ctxt: Context, instance_uuid: str, flavor: dict[str, Any]) -> dict[str, Any]:
        """Give the instance ``flavor``: on its host if it still fits there, else on another. The
        migration started."""
        return self._moves().call(ctxt, "resize_instance", instance_uuid=instance_uuid, flavor=flavor)

    def confirm_resize(self, ctxt: Context, instance_uuid: str) -> dict[str, Any]:
        return self._moves().call(ctxt, "confirm_resize", instance_uuid=instance_uuid)

    def revert_resize(self, ctxt: Context, instance_uuid: str) -> dict[str, Any]:
        return self._moves().call(ctxt, "revert_resize", instance_uuid=instance_uuid)

    def evacuate_host(self, ctxt: Context, host: str) -> list[dict[str, Any]]:
        """Rebuild elsewhere every instance of ``host``, which must be down; the migrations started."""
        return self._moves().call(ctxt, "evacuate_host", host=host)

    def list_migrations(self, ctxt: Context, host: str | None = None, status: str | None = None,
                        instance_uuid: str | None = None) -> list[dict[str, Any]]:
        """Migrations, newest first: of ``host`` (as source or destination), in ``status``, of one
        instance."""
        return self._moves().call(ctxt, "list_migrations", host=host, status=status,
                                  instance_uuid=instance_uuid)

    def move_update(self, ctxt: Context, instance_uuid: str, host: str, migration_id: int, outcome: str,
                    fault: dict | None = None, transfer: dict | None = None, steps: bool = False,
                    figures: dict | None = None) -> None:
        """From the destination's agent: the move ended (``outcome`` done or failed, with ``fault``).
        Of a move between two agents (``steps``, 1.5): from either agent, a step ended (prepared,
        with the destination's ``transfer``; migrated, with the source driver's ``figures`` of it,
        1.8: left out under a lower cap, schedulers that would refuse them) or failed, or the move is
        done."""
        if not steps:
            self._agents.prepare(version="1.1").cast(ctxt, "move_update", instance_uuid=instance_uuid,
                                                     host=host, migration_id=migration_id, outcome=outcome,
                                                     fault=fault)
            return
        extra: dict[str, Any] = {}
        version = MOVE_STEPS_VERSION
        if figures is not None and self._client.can_send_version(MOVE_FIGURES_VERSION):
            extra["figures"] = figures
            version = MOVE_FIGURES_VERSION
        self._agents.prepare(version=version).cast(
            ctxt, "move_update", instance_uuid=instance_uuid, host=host, migration_id=migration_id,
            outcome=outcome, fault=fault, transfer=transfer, **extra)

    # -- operators: host aggregates, server groups, hosts, scaling groups ------

    def admin_call(self, ctxt: Context, method: str, **kwargs: Any) -> Any:
        """Call one method of the admin API (scheduler.admin.grouping, scheduler.admin.hosts,
        scheduler.admin.flavors, scheduler.moves.rebalance_api, scheduler.moves.jobs.api) or of the
        scaling API (SCALING_METHODS), at 1.0, or 1.1 for the flavors' (FLAVOR_METHODS), 1.2 for
        rebalance plans' (REBALANCE_METHODS), 1.3 for jobs' (JOB_METHODS)."""
        api = api_versions.SCALING if method in SCALING_METHODS else api_versions.ADMIN
        client = self._clients[api.name]
        if method in FLAVOR_METHODS:
            client = client.prepare(version="1.1")
        elif method in REBALANCE_METHODS:
            client = client.prepare(version="1.2")
        elif method in JOB_METHODS:
            client = client.prepare(version="1.3")
        return client.call(ctxt, method, **kwargs)
