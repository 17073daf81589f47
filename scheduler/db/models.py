"""SQLAlchemy models of the scheduler's database.

The rest of Berth never sees these classes: :mod:`scheduler.db.api` reads and
writes rows as plain dicts. Every change here needs a migration under
``migrations/versions`` that creates exactly the same thing (a unit test
compares the two).

Timestamps are naive UTC datetimes.
"""

from datetime import datetime
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from scheduler import states

# Stable constraint and index names on every backend, so that migrations can
# refer to them by name.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_N_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

#: MySQL's DATETIME drops the fraction of a second unless told otherwise.
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

class Base(DeclarativeBase):
    metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: sa.JSON, datetime: Timestamp}


class Instance(Base):
    __tablename__ = "instances"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(sa.String(36), nullable=False, unique=True, index=True)
    project_id: Mapped[str | None] = mapped_column(sa.String(255))
    host: Mapped[str | None] = mapped_column(sa.String(255), index=True)
    node: Mapped[str | None] = mapped_column(sa.String(255))
    state: Mapped[str] = mapped_column(sa.String(16), nullable=False, index=True, default=states.SCHEDULING)
    flavor_name: Mapped[str | None] = mapped_column(sa.String(255))
    memory_mb: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    root_gb: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    ephemeral_gb: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    vcpus: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    request_spec: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON)
    filter_properties: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON)
    attempts: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0, server_default=sa.text("0"))
    fault_reason: Mapped[str | None] = mapped_column(sa.Text)
    fault_details: Mapped[str | None] = mapped_column(sa.Text)
    created_at: Mapped[datetime] = mapped_column(Timestamp, nullable=False)
    updated_at: Mapped[datetime | None] = mapped_column(Timestamp)
    scheduled_at: Mapped[datetime | None] = mapped_column(Timestamp)
    launched_at: Mapped[datetime | None] = mapped_column(Timestamp)
    deleted_at: Mapped[datetime | None] = mapped_column(Timestamp)
    # The name the operator gave (``berth server create --name``); not unique, as in Nova.
    display_name: Mapped[str | None] = mapped_column(sa.String(255), index=True)
    # The scaling group the instance is a member of (no foreign key: a member row outlives
    # its group in the shadow tables, and a group goes only once its members are DELETED).
    scaling_group_uuid: Mapped[str | None] = mapped_column(sa.String(36), index=True)
    # While a move is under way (MIGRATING, VERIFY_RESIZE): the other host that holds the
    # instance, the destination of a migration or the source of a resize waiting for confirmation.
    move_host: Mapped[str | None] = mapped_column(sa.String(255), index=True)
    # The request id of the run_instance that booted it (req-<uuid4>): what its log lines carry.
    request_id: Mapped[str | None] = mapped_column(sa.String(40))


class ComputeNode(Base):
    """The last resource report of each compute host."""

    __tablename__ = "compute_nodes"
    __table_args__ = (sa.UniqueConstraint("host"),)

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    host: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    nodename: Mapped[str | None] = mapped_column(sa.String(255))
    hypervisor_type: Mapped[str | None] = mapped_column(sa.String(255))
    memory_mb: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    memory_mb_used: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    # May be negative: an over-committed host.
    free_ram_mb: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    local_gb: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    local_gb_used: Mapped[float] = mapped_column(sa.Double, nullable=False, default=0.0)
    free_disk_gb: Mapped[float] = mapped_column(sa.Double, nullable=False, default=0.0)
    vcpus: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    vcpus_used: Mapped[float] = mapped_column(sa.Double, nullable=False, default=0.0)
    running_vms: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    # The rest of the last report, so that new report fields need no migration.
    stats: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON)
    reported_at: Mapped[datetime | None] = mapped_column(Timestamp)  # the agent's clock
    updated_at: Mapped[datetime] = mapped_column(Timestamp, nullable=False)  # the scheduler's


class Service(Base):
    """One row per (host, binary): the last heartbeat of each service."""

    __tablename__ = "services"
    __table_args__ = (sa.UniqueConstraint("host", "binary"),)

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    host: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    binary: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    topic: Mapped[str | None] = mapped_column(sa.String(255))
    disabled: Mapped[bool] = mapped_column(
        sa.Boolean, nullable=False, default=False, server_default=sa.false()
    )
    disabled_reason: Mapped[str | None] = mapped_column(sa.String(255))
    last_seen_at: Mapped[datetime | None] = mapped_column(Timestamp)
    version: Mapped[str | None] = mapped_column(sa.String(64))  # Berth's, as the service last said
    created_at: Mapped[datetime] = mapped_column(Timestamp, nullable=False)


class Aggregate(Base):
    """A host aggregate: a named set of hosts with metadata and an optional zone."""

    __tablename__ = "aggregates"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(sa.String(255), nullable=False, unique=True)
    availability_zone: Mapped[str | None] = mapped_column(sa.String(255))
    # "metadata" is the declarative base's own attribute: mapped under another name.
    meta: Mapped[dict[str, Any] | None] = mapped_column("metadata", sa.JSON)
    created_at: Mapped[datetime] = mapped_column(Timestamp, nullable=False)
    updated_at: Mapped[datetime | None] = mapped_column(Timestamp)


class Flavor(Base):
    """A named flavor: the sizes and extra specs ``berth server create --flavor NAME`` requests."""

    __tablename__ = "flavors"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(sa.String(255), nullable=False, unique=True)
    memory_mb: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    root_gb: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    ephemeral_gb: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    vcpus: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    # {key: value}, both strings, as Nova's flavor extra specs.
    extra_specs: Mapped[dict[str, Any]] = mapped_column(sa.JSON, nullable=False)
    created_at: Mapped[datetime] = mapped_column(Timestamp, nullable=False)
    updated_at: Mapped[datetime | None] = mapped_column(Timestamp)


class AggregateHost(Base):
    __tablename__ = "aggregate_hosts"
    __table_args__ = (sa.UniqueConstraint("aggregate_id", "host"),)

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    aggregate_id: Mapped[int] = mapped_column(
        sa.Integer, sa.ForeignKey("aggregates.id", ondelete="CASCADE"), nullable=False
    )
    host: Mapped[str] = mapped_column(sa.String(255), nullable=False, index=True)


class ServerGroup(Base):
    """A server group: a placement policy (affinity, anti-affinity, soft-...) and its rules."""

    __tablename__ = "server_groups"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(sa.String(36), nullable=False, unique=True, index=True)
    name: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    project_id: Mapped[str | None] = mapped_column(sa.String(255))
    policy: Mapped[str] = mapped_column(sa.String(32), nullable=False)
    rules: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON)
    created_at: Mapped[datetime] = mapped_column(Timestamp, nullable=False)


class ServerGroupMember(Base):
    __tablename__ = "server_group_members"
    __table_args__ = (sa.UniqueConstraint("group_id", "instance_uuid"),)

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    group_id: Mapped[int] = mapped_column(
        sa.Integer, sa.ForeignKey("server_groups.id", ondelete="CASCADE"), nullable=False
    )
    instance_uuid: Mapped[str] = mapped_column(sa.String(36), nullable=False, index=True)


class HostGeneration(Base):
    """A counter per host that every placement on it bumps.

    Schedulers claim a host with a compare-and-set on its generation: a
    placement commits only if no other scheduler placed on the host since
    this one last looked.
    """

    __tablename__ = "host_generations"

    host: Mapped[str] = mapped_column(sa.String(255), primary_key=True)
    generation: Mapped[int] = mapped_column(sa.BigInteger, nullable=False, default=0)


class Migration(Base):
    """One move of an instance (resize, migration, live migration, evacuation) and its outcome,
    as Nova's migrations table keeps them."""

    __tablename__ = "migrations"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    instance_uuid: Mapped[str] = mapped_column(sa.String(36), nullable=False, index=True)
    kind: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    # migrating, finished (a resize waiting for confirmation), confirmed, reverted, completed, error
    status: Mapped[str] = mapped_column(sa.String(16), nullable=False, index=True)
    source_host: Mapped[str | None] = mapped_column(sa.String(255), index=True)
    source_node: Mapped[str | None] = mapped_column(sa.String(255))
    dest_host: Mapped[str | None] = mapped_column(sa.String(255), index=True)
    dest_node: Mapped[str | None] = mapped_column(sa.String(255))
    old_flavor: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON)
    new_flavor: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON)
    reason: Mapped[str | None] = mapped_column(sa.Text)
    #: What the destination is told (the move_instance cast's instance, request_spec,
    #: filter_properties and migration), kept to be told again: None for moves of a Berth before it.
    request: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON)
    #: The step a move between two agents (compute API 2.0) is at: prepare (the destination
    #: claims and opens what the transfer needs), migrate (the source hands the instance over),
    #: finish (the destination takes it); None for a move its destination takes alone (1.x).
    step: Mapped[str | None] = mapped_column(sa.String(16))
    #: What the destination prepared for the source to hand the instance over (its driver's).
    transfer: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON)
    #: What the source's driver measured of a live migration (scheduler.db.moves.FIGURES), told
    #: with its migrated step; None when it said nothing of it.
    figures: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON)
    created_at: Mapped[datetime] = mapped_column(Timestamp, nullable=False)
    updated_at: Mapped[datetime | None] = mapped_column(Timestamp)
    finished_at: Mapped[datetime | None] = mapped_column(Timestamp)


class RebalancePlan(Base):
    """A plan of migrations (``berth rebalance plan``) saved to be shown and applied: its goal and
    options, the figures before and after, and how far applying it went."""

    __tablename__ = "rebalance_plans"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    goal: Mapped[str] = mapped_column(sa.String(32), nullable=False)
    options: Mapped[dict[str, Any]] = mapped_column(sa.JSON, nullable=False)
    # planned, applying, stopping, stopped, done
    state: Mapped[str] = mapped_column(sa.String(16), nullable=False, index=True)
    reason: Mapped[str | None] = mapped_column(sa.Text)  # why it stopped
    summary: Mapped[dict[str, Any]] = mapped_column(sa.JSON, nullable=False)
    created_at: Mapped[datetime] = mapped_column(Timestamp, nullable=False)
    updated_at: Mapped[datetime | None] = mapped_column(Timestamp)


class RebalanceStep(Base):
    """One migration of a rebalance plan: the instance, where the plan saw it and where it goes,
    the generations of both hosts when the plan was made, and what became of it."""

    __tablename__ = "rebalance_steps"

    plan_id: Mapped[int] = mapped_column(
        sa.Integer, sa.ForeignKey("rebalance_plans.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    instance_uuid: Mapped[str] = mapped_column(sa.String(36), nullable=False)
    source_host: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    dest_host: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    source_generation: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    dest_generation: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    memory_mb: Mapped[float] = mapped_column(sa.Double, nullable=False)
    reason: Mapped[str] = mapped_column(sa.Text, nullable=False)  # why the plan moves it
    # pending, running, done, failed (running, done and failed read from its migration)
    status: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    migration_id: Mapped[int | None] = mapped_column(sa.Integer)
    failure: Mapped[str | None] = mapped_column(sa.Text)  # why it was refused


class Job(Base):
    """Work the schedulers carry on until it ends, whoever asked for it and whatever becomes of
    that command: the drain of a host (``berth host drain``) or the applying of a rebalance plan
    (``berth rebalance apply``), see scheduler.moves.jobs. One scheduler at a time carries a job on, by
    lease, as a scaling group is synced; every write to the row bumps ``version``, and the
    scheduler holding the lease writes with a compare-and-set on it."""

    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(sa.String(16), nullable=False)  # drain, rebalance
    # running, stopping (no new step starts; those under way end), done, stopped
    state: Mapped[str] = mapped_column(sa.String(16), nullable=False, index=True)
    host: Mapped[str | None] = mapped_column(sa.String(255), index=True)  # the host drained
    plan_id: Mapped[int | None] = mapped_column(sa.Integer, index=True)  # the rebalance plan applied
    # "drain:<host>" or "rebalance:<plan id>" until the job ends, then NULL: one job at a time
    # drains a host or applies a plan, however many commands ask at once.
    active_key: Mapped[str | None] = mapped_column(sa.String(300), unique=True)
    live: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, default=False, server_default=sa.false())
    max_parallel: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    timeout: Mapped[int | None] = mapped_column(sa.Integer)  # seconds, as asked
    deadline: Mapped[datetime | None] = mapped_column(Timestamp)  # past it, no new step starts
    reason: Mapped[str | None] = mapped_column(sa.Text)  # why it stopped
    lease_owner: Mapped[str | None] = mapped_column(sa.String(255))
    lease_expires_at: Mapped[datetime | None] = mapped_column(Timestamp)
    version: Mapped[int] = mapped_column(
        sa.BigInteger, nullable=False, default=0, server_default=sa.text("0"))
    created_at: Mapped[datetime] = mapped_column(Timestamp, nullable=False)
    updated_at: Mapped[datetime | None] = mapped_column(Timestamp)
    finished_at: Mapped[datetime | None] = mapped_column(Timestamp)


class JobStep(Base):
    """One instance a drain moves: its migration once started, and the outcome (a rebalance
    job's steps are its plan's, rebalance_steps)."""

    __tablename__ = "job_steps"

    job_id: Mapped[int] = mapped_column(
        sa.Integer, sa.ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    instance_uuid: Mapped[str] = mapped_column(sa.String(36), nullable=False)
    # pending, running, done, failed
    status: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    migration_id: Mapped[int | None] = mapped_column(sa.Integer)
    dest_host: Mapped[str | None] = mapped_column(sa.String(255))  # where it went
    reason: Mapped[str | None] = mapped_column(sa.Text)  # why it failed
    updated_at: Mapped[datetime | None] = mapped_column(Timestamp)


class ScalingGroup(Base):
    """A scaling group: its spec and instance template, the count the controller keeps, and
    the lease of the controller syncing it.

    ``version`` goes up with every write to the row: controllers write with a
    compare-and-set on it, so one whose lease was taken meanwhile writes nothing.
    """

    __tablename__ = "scaling_groups"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(sa.String(36), nullable=False, unique=True, index=True)
    name: Mapped[str] = mapped_column(sa.String(255), nullable=False, unique=True)
    project_id: Mapped[str | None] = mapped_column(sa.String(255))
    # As scheduler.scaling.spec.parse_spec accepts it: min, max, metrics, tolerance, behavior.
    spec: Mapped[dict[str, Any]] = mapped_column(sa.JSON, nullable=False)
    # What each member is booted as: flavor_name or sizes, scheduler_hints, availability_zone,
    # server_group_uuid.
    template: Mapped[dict[str, Any]] = mapped_column(sa.JSON, nullable=False)
    paused: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, default=False, server_default=sa.false())
    desired: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    # The last sync's metrics, conditions and limit, for ``berth scaling group show``.
    status: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON)
    last_synced_at: Mapped[datetime | None] = mapped_column(Timestamp)  # None: never synced
    # Back-off for replacing ERROR members: not before replace_after, after that many failures.
    replace_after: Mapped[datetime | None] = mapped_column(Timestamp)
    replace_failures: Mapped[int] = mapped_column(
        sa.Integer, nullable=False, default=0, server_default=sa.text("0"))
    lease_owner: Mapped[str | None] = mapped_column(sa.String(255))
    lease_expires_at: Mapped[datetime | None] = mapped_column(Timestamp)
    version: Mapped[int] = mapped_column(
        sa.BigInteger, nullable=False, default=0, server_default=sa.text("0"))
    created_at: Mapped[datetime] = mapped_column(Timestamp, nullable=False)
    updated_at: Mapped[datetime | None] = mapped_column(Timestamp)
    # Set by a delete while members remain: the controller deletes them, then the row.
    deleted_at: Mapped[datetime | None] = mapped_column(Timestamp)


class ScalingGroupRecommendation(Base):
    """A count a sync of the group recommended (the stabilization windows read them)."""

    __tablename__ = "scaling_group_recommendations"
    __table_args__ = (sa.Index("ix_scaling_group_recommendations_group_id_recorded_at",
                               "group_id", "recorded_at"),)

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    group_id: Mapped[int] = mapped_column(
        sa.Integer, sa.ForeignKey("scaling_groups.id", ondelete="CASCADE"), nullable=False
    )
    recorded_at: Mapped[datetime] = mapped_column(Timestamp, nullable=False, index=True)
    replicas: Mapped[int] = mapped_column(sa.Integer, nullable=False)


class ScalingGroupEvent(Base):
    """A change of the group's desired count (the rate policies read them) and why."""

    __tablename__ = "scaling_group_events"
    __table_args__ = (sa.Index("ix_scaling_group_events_group_id_recorded_at", "group_id", "recorded_at"),)

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    group_id: Mapped[int] = mapped_column(
        sa.Integer, sa.ForeignKey("scaling_groups.id", ondelete="CASCADE"), nullable=False
    )
    recorded_at: Mapped[datetime] = mapped_column(Timestamp, nullable=False, index=True)
    change: Mapped[int] = mapped_column(sa.Integer, nullable=False)  # > 0 up, < 0 down
    reason: Mapped[str | None] = mapped_column(sa.Text)


class InstanceMetric(Base):
    """The last sample of one metric of one instance: measured by its agent (cpu, memory) or
    pushed (any other name). No foreign key: samples of instances DELETED or archived are
    pruned (scheduler.db.instance_metrics)."""

    __tablename__ = "instance_metrics"

    instance_uuid: Mapped[str] = mapped_column(sa.String(36), primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    value: Mapped[float] = mapped_column(sa.Double, nullable=False)
    sampled_at: Mapped[datetime] = mapped_column(Timestamp, nullable=False, index=True)  # database time
    source: Mapped[str] = mapped_column(sa.String(16), nullable=False)  # "agent" or "pushed"


def _table(model: type[Base]) -> sa.Table:
    """The table of ``model`` (a Table, though DeclarativeBase declares a FromClause)."""
    return cast(sa.Table, model.__table__)


instances = _table(Instance)
host_generations = _table(HostGeneration)
compute_nodes = _table(ComputeNode)
services = _table(Service)
aggregates = _table(Aggregate)
aggregate_hosts = _table(AggregateHost)
flavors = _table(Flavor)
server_groups = _table(ServerGroup)
server_group_members = _table(ServerGroupMember)
scaling_groups = _table(ScalingGroup)
scaling_group_recommendations = _table(ScalingGroupRecommendation)
scaling_group_events = _table(ScalingGroupEvent)
instance_metrics = _table(InstanceMetric)
migrations = _table(Migration)
rebalance_plans = _table(RebalancePlan)
rebalance_steps = _table(RebalanceStep)
jobs = _table(Job)
job_steps = _table(JobStep)


def _shadow(table: sa.Table) -> sa.Table:
    """Where ``berth-manage db archive`` moves old rows of ``table``: its columns and key, no
    other constraint or index (an archived row outlives the rows it referred to)."""
    return sa.Table(
        f"shadow_{table.name}",
        Base.metadata,
        *(sa.Column(c.name, c.type, nullable=c.nullable, primary_key=c.primary_key, autoincrement=False)
          for c in table.columns),
    )


shadow_instances = _shadow(instances)
shadow_server_group_members = _shadow(server_group_members)
