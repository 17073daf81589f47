"""berth-compute-agent of an earlier release, as far as the compute API goes (tests.previous_release):
the release before this one's (compute API 1.2) unless BERTH_AGENT_RELEASE says another."""

import os
import sys

from compute_agent import manager
from compute_agent.cmd import agent
from tests.previous_release import PREVIOUS, serve_release

if __name__ == "__main__":
    serve_release(manager.ComputeManager, os.environ.get("BERTH_AGENT_RELEASE", PREVIOUS))
    sys.exit(agent.main())
