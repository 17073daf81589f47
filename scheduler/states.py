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
SHUTOFF = "SHUTOFF"  # powered off on its host, which still holds its claim (as Nova's SHUTOFF)
# Told to its agent, not yet done: each keeps a second request (a move, another power action) out
# until the agent says it is done, as Nova's task_state does (powering-off, powering-on, rebooting).
POWERING_OFF = "POWERING_OFF"  # stop: ACTIVE -> SHUTOFF
POWERING_ON = "POWERING_ON"  # start: SHUTOFF -> ACTIVE
REBOOTING = "REBOOTING"  # reboot, soft or hard: ACTIVE -> ACTIVE

ALL = (SCHEDULING, SCHEDULED, BUILDING, ACTIVE, ERROR, DELETING, DELETED, MIGRATING, VERIFY_RESIZE, SHUTOFF,
       POWERING_OFF, POWERING_ON, REBOOTING)
#: States of an instance held on two hosts (its host and its move_host).
MOVING = (MIGRATING, VERIFY_RESIZE)
#: States of an instance that runs on a host: ACTIVE, and moving (a scaling group counts it as ACTIVE).
RUNNING = (ACTIVE, *MOVING)
#: States of a power action told to its agent and not yet done.
POWERING = (POWERING_OFF, POWERING_ON, REBOOTING)
#: States of an instance on its host that is not running, or whose power changes: held on its host
#: (its claim kept), not ready (a scaling group counts it, without its metrics).
POWER = (SHUTOFF, *POWERING)
#: States an agent may report.
FROM_AGENT = (BUILDING, ACTIVE, ERROR, DELETED, SHUTOFF)
#: States in which a reschedule from the agent that holds it is accepted.
RESCHEDULABLE = (SCHEDULING, SCHEDULED, BUILDING)
