"""berth-scheduler that dies (os._exit, as a segfault or the OOM killer would end it)
whenever it handles the deletion of CRASH_UUID: a message that takes down every
worker it reaches."""

import functools
import os
import sys

from scheduler import manager
from scheduler.cmd import scheduler

CRASH_UUID = "dead0000-0000-4000-8000-00000000dead"
_delete_instance = manager.SchedulerManager.delete_instance


@functools.wraps(_delete_instance)  # its declared callers too
def delete_instance(self, context, instance_uuid):
    if instance_uuid == CRASH_UUID:
        os._exit(3)
    return _delete_instance(self, context, instance_uuid)


if __name__ == "__main__":
    manager.SchedulerManager.delete_instance = delete_instance
    sys.exit(scheduler.main())
