"""A move's statuses, kinds and steps, as the migrations table records them and the
scheduler answers them (scheduler.db.moves keeps the table; the CLI reads these alone)."""

MIGRATING = "migrating"
FINISHED = "finished"  # a resize done, waiting to be confirmed or reverted
CONFIRMED = "confirmed"
REVERTED = "reverted"
COMPLETED = "completed"
ERROR = "error"
#: Every status of a migration.
STATUSES = (MIGRATING, FINISHED, CONFIRMED, REVERTED, COMPLETED, ERROR)
#: Those of a move under way: the instance is held on two hosts.
ACTIVE_STATUSES = (MIGRATING, FINISHED)
#: Those of a move that ended; finished_at is set on entering one.
ENDED_STATUSES = (CONFIRMED, REVERTED, COMPLETED, ERROR)

RESIZE = "resize"
MIGRATION = "migration"
LIVE_MIGRATION = "live-migration"
EVACUATION = "evacuation"
#: Every kind of move.
KINDS = (RESIZE, MIGRATION, LIVE_MIGRATION, EVACUATION)

#: The steps of a move between two agents (compute API 2.0), in order: the destination
#: prepares, the source migrates the instance out, the destination finishes taking it.
PREPARE = "prepare"
MIGRATE = "migrate"
FINISH = "finish"
STEPS = (PREPARE, MIGRATE, FINISH)
