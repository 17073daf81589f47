"""The version of each RPC API Berth serves, and what each version added.

The servers' endpoints declare theirs (``RPC_API``), the clients send the oldest
version that carries what they send, and ``[upgrade_levels]`` caps each API's clients
(scheduler.conf.upgrade_levels) while servers of an older release still run. A new
minor version only adds (a method, an optional argument); a change a server of the
version before could not serve is a new version here, the servers' ``RPC_API`` the
newest, and a client method that sends it in its older form below the cap
(compute_agent.client.ComputeClient.terminate_instance).
"""

from berth_contract.versions import API

#: The schedulers' API (scheduler.manager.SchedulerManager, topic ``scheduler``), which
#: the agents, the API services, ``berth`` and the scaling controller send to.
SCHEDULER = API("scheduler", (
    ("1.0", "run_instance, select_destinations, report_resources, instance_update, delete_instance, "
            "list_hosts, list_instances, show_instance: the API of the releases before versions, whose "
            "messages all said 1.0"),
    ("1.1", "moves: migrate_instance, resize_instance, confirm_resize, revert_resize, evacuate_host, "
            "list_migrations, and move_update from the agents"),
    ("1.2", "report_resources is cast to the exchange scheduler_reports_fanout, which every scheduler "
            "takes reports from (shared ingestion: [scheduler] report_ingestion), no longer to "
            "scheduler_fanout"),
    ("1.3", "bundles: one message carrying several casts (run_instance from a scaling group's sync or "
            "a client casting many at once), each handled as if it came alone"),
    ("1.4", "a host that stops: report_resources may say stopped (the agent's last report as it stops "
            "cleanly: the host is down at once); start_build: an agent asks before it builds whether the "
            "instance is still placed on its host"),
    ("1.5", "moves between two agents: move_update says prepared (from the destination, with its "
            "transfer) and migrated (from the source), and failed from either host; reports carry "
            "move_steps, the step each move of the host is at"),
    ("1.6", "an instance's power: stop_instance, start_instance, reboot_instance (calls, answered with "
            "the instance POWERING_OFF, POWERING_ON or REBOOTING, or refused with the reason); "
            "instance_update may say SHUTOFF"),
    ("1.7", "instance_update may say SHUTOFF, with a fault saying why, of an ACTIVE instance whose guest "
            "powered itself off"),
    ("1.8", "move_update says migrated with figures: the source driver's measures of a live migration "
            "(downtime_ms, total_ms, memory_bytes), recorded on the migration"),
    ("1.9", "the agents' instance_update, start_build and move_update go to the queue scheduler_agents, "
            "which every scheduler takes besides scheduler: they no longer wait behind the clients' "
            "requests queued there"),
))

#: The compute agents' API (compute_agent.manager.ComputeEndpoint, and beside it
#: compute_agent.fake_load_endpoint.FakeLoadEndpoint; topic ``compute.<host>``), which the
#: schedulers and ``berth fake-load`` send to.
COMPUTE = API("compute", (
    ("1.0", "run_instance, terminate_instance, set_fake_load, clear_fake_load: the API of the releases "
            "before versions"),
    ("1.1", "terminate_instance takes reason: why the scheduler terminates the instance (deleted, its "
            "build timed out, found deleted on the host), which the agent logs"),
    ("1.2", "move_instance: the destination of a move claims the instance and takes it over; end_resize: "
            "the host of a resize in place holds the new flavor (confirmed) or the old one (reverted)"),
    ("2.0", "moves between two agents, the scheduler recording each step: prepare_move (the destination "
            "claims the instance and opens what the transfer needs; on the instance's own host, a resize "
            "in place), migrate_out (the source hands the instance over), finish_move (the destination "
            "takes it), abort_move (the source runs the instance again after a move that failed or a "
            "resize reverted); run_instance, terminate_instance and end_resize as in 1.2. Left in 1.x, "
            "still served: move_instance (the destination taking a move alone), set_fake_load and "
            "clear_fake_load (served by the agents of the fake driver)"),
    ("2.1", "an instance's power: power_off_instance, power_on_instance, reboot_instance (casts from a "
            "scheduler), and console_output (a call from a client: the last lines of the instance's serial "
            "console)"),
))

#: The operators' API (scheduler.admin.grouping.AdminEndpoint: aggregates and server groups;
#: scheduler.admin.hosts.HostAdminEndpoint: hosts; scheduler.admin.flavors.FlavorEndpoint:
#: flavors; scheduler.moves.rebalance_api.RebalanceEndpoint: rebalance plans;
#: scheduler.moves.jobs.api.JobEndpoint: drains and plans carried on as jobs), topic ``scheduler``,
#: which ``berth``
#: and the schedulers themselves (aggregates_changed, hosts_changed) send to.
ADMIN = API("admin", (
    ("1.0", "aggregates, server groups, host enable, disable and delete, list_services, aggregates_changed, "
            "hosts_changed: the API of the releases before versions"),
    ("1.1", "flavors: create_flavor, list_flavors, show_flavor, set_flavor_properties, "
            "unset_flavor_properties, delete_flavor"),
    ("1.2", "rebalance plans: plan_rebalance, list_rebalance_plans, show_rebalance_plan, "
            "start_rebalance_step, stop_rebalance_plan"),
    ("1.3", "jobs the schedulers carry on: start_drain, apply_rebalance_plan, show_job, list_jobs, "
            "stop_job"),
))

#: Scaling groups and their members' metrics (scheduler.scaling.api.ScalingGroupEndpoint,
#: scheduler.scaling.instance_metrics_api.InstanceMetricsEndpoint), topic ``scheduler``, which
#: ``berth`` sends to.
SCALING = API("scaling", (
    ("1.0", "create, list, show, update, pause, resume and delete scaling groups, push and show instance "
            "metrics: the API of the releases before versions"),
))

ALL = (SCHEDULER, COMPUTE, ADMIN, SCALING)
