"""Instance states, as the scheduler records them."""

SCHEDULING = "SCHEDULING"  # received, not yet placed
SCHEDULED = "SCHEDULED"  # placed, cast to its agent
BUILDING = "BUILDING"  # claimed by its agent, being built
ACTIVE = "ACTIVE"
ERROR = "ERROR"  # with a fault reason
DELETING = "DELETING"  # terminate sent to its agent
DELETED = "DELETED"

ALL = (SCHEDULING, SCHEDULED, BUILDING, ACTIVE, ERROR, DELETING, DELETED)
#: States an agent may report.
FROM_AGENT = (BUILDING, ACTIVE, ERROR, DELETED)
#: States in which a reschedule from the agent that holds it is accepted.
RESCHEDULABLE = (SCHEDULING, SCHEDULED, BUILDING)
