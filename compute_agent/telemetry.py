"""What a compute agent counts, as Prometheus metrics of its process (one agent per
process, or the all-in-one's agents summed)."""

from prometheus_client import Counter, Histogram

import scheduler.telemetry  # noqa: F401 - its settings of prometheus_client apply here too

CLAIMED = "claimed"  # the resources were held: the build starts
REFUSED = "refused"  # they were not there: the instance goes back to the scheduler

CLAIMS = Counter(
    "berth_agent_claims",
    "Build requests by what the agent's claim of the resources made of them: claimed, or refused "
    "(sent back to the scheduler for a reschedule).",
    ["outcome"])
for _outcome in (CLAIMED, REFUSED):
    CLAIMS.labels(_outcome)

ACTIVE = "active"
FAILED = "failed"  # sent back to the scheduler
INTERRUPTED = "interrupted"  # the agent stopped; the build resumes at its next start

BUILDS = Counter(
    "berth_agent_builds",
    "Builds ended, by outcome: active, failed (sent back to the scheduler), interrupted (by a stop; "
    "resumed at the next start).",
    ["outcome"])
for _outcome in (ACTIVE, FAILED, INTERRUPTED):
    BUILDS.labels(_outcome)

BUILD_SECONDS = Histogram(
    "berth_agent_build_seconds",
    "Time the driver took to build an instance that went ACTIVE.",
    buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800))

REPORTS = Counter(
    "berth_agent_reports",
    "Resource reports sent to the schedulers (periodic, and on a change of what the host holds).")

DONE = "done"

MOVES = Counter(
    "berth_agent_moves",
    "Moves this agent took in (migrations, evacuations, resizes, in place or from another host), by "
    "outcome told the scheduler: done, or failed (refused claim or failed driver).",
    ["outcome"])
for _outcome in (DONE, FAILED):
    MOVES.labels(_outcome)

MIGRATE_IN_SECONDS = Histogram(
    "berth_agent_migrate_in_seconds",
    "Time the driver took to take in, or resize, an instance, whatever the outcome.",
    buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800))

LIVE_MIGRATION_DOWNTIME_SECONDS = Histogram(
    "berth_agent_live_migration_downtime_seconds",
    "Time a guest migrated live out of this host was paused (its driver's measure: qemu's downtime).",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))

LIVE_MIGRATION_TRANSFER_SECONDS = Histogram(
    "berth_agent_live_migration_transfer_seconds",
    "Time the memory of a guest migrated live out of this host took to go over (its driver's measure: "
    "qemu's total time of the migration; the mirror of its disk before it is not counted).",
    buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800))


def observe_live_migration(figures):
    """Count a live migration out by what its driver measured ({"downtime_ms", "total_ms", ...})."""
    if isinstance(figures.get("downtime_ms"), int):
        LIVE_MIGRATION_DOWNTIME_SECONDS.observe(figures["downtime_ms"] / 1000)
    if isinstance(figures.get("total_ms"), int):
        LIVE_MIGRATION_TRANSFER_SECONDS.observe(figures["total_ms"] / 1000)
