"""berth-compute-agent whose instance records turn read-only while the file named by
BERTH_TEST_READ_ONLY exists (as root, a read-only directory does not stop the
agent: the fault has to be made)."""

import errno
import os
import sys

from compute_agent import instance_store
from compute_agent.cmd import agent

_write = instance_store.InstanceStore._write


def _write_unless_read_only(self):
    if os.path.exists(os.environ["BERTH_TEST_READ_ONLY"]):
        raise OSError(errno.EROFS, "Read-only file system", self.path)
    return _write(self)


if __name__ == "__main__":
    instance_store.InstanceStore._write = _write_unless_read_only
    sys.exit(agent.main())
