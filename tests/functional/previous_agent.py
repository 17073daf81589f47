"""berth-compute-agent of the previous release, as far as the compute API goes: its endpoint
serves version 1.0, whose terminate_instance takes no reason (tests.previous_release)."""

import sys

from compute_agent import manager
from compute_agent.cmd import agent
from tests.previous_release import PreviousComputeEndpoint

if __name__ == "__main__":
    manager.ComputeEndpoint = PreviousComputeEndpoint
    sys.exit(agent.main())
