"""Instance states, as the scheduler records them."""

SCHEDULING = "SCHEDULING"  # received, not yet placed
SCHEDULED = "SCHEDULED"  # placed, cast to its agent
BUILDING = "BUILDING"  # claimed by its agent, being built
ACTIVE = "ACTIVE"
ERROR = "ERROR"  # with a fault reason
DELETING = "DELETING"  # terminate sent to its agent
DELETED = "DELETED"
MIGRATING = "MIGRATING"  # being moved: held on its host and on its move_host until the move ends
VERIFY_RESIZE = "VERIFY_RESIZE"  # resized on its host; its move_host keeps the old size until confirmed

ALL = (SCHEDULING, SCHEDULED, BUILDING, ACTIVE, ERROR, DELETING, DELETED, MIGRATING, VERIFY_RESIZE)
#: States of an instance held on two hosts (its host and its move_host).
MOVING = (MIGRATING, VERIFY_RESIZE)
#: States of an instance that runs on a host: ACTIVE, and moving (a scaling group counts it as ACTIVE).
RUNNING = (ACTIVE, *MOVING)
#: States an agent may report.
FROM_AGENT = (BUILDING, ACTIVE, ERROR, DELETED)
#: States in which a reschedule from the agent that holds it is accepted.
RESCHEDULABLE = (SCHEDULING, SCHEDULED, BUILDING)
