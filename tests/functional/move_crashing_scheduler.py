"""berth-scheduler that dies (os._exit, as a SIGKILL would end it) the first time it tells an agent
to take a move in (prepare_move, or move_instance capped below compute 2.0): right after the
transaction recording the move committed, before any agent heard of it."""

import os
import sys

from compute_agent import client
from scheduler.cmd import scheduler


def dies(self, *args, **kwargs):
    os._exit(9)


if __name__ == "__main__":
    client.ComputeClient.move_instance = dies
    client.ComputeClient.prepare_move = dies
    sys.exit(scheduler.main())
