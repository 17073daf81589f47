"""The log as an operator reads it: set up by scheduler.process.startup.setup_logging (oslo.log)
into a file, in the test process, and put back as it was afterwards."""

import contextlib
import logging
import re
import sys

from scheduler.process import startup as config

REQUEST_ID = re.compile(r"req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@contextlib.contextmanager
def service_log(conf, path, prog="berth-scheduler", debug=False):
    """Log to ``path`` as ``prog`` would with ``[DEFAULT] log_file`` (and ``debug``); yields
    a function that returns the lines written so far."""
    root = logging.getLogger()
    handlers, level, excepthook = list(root.handlers), root.level, sys.excepthook
    named = [pair.partition("=")[0] for pair in conf.default_log_levels] + list(config.QUIET_LOGGERS)
    levels = {name: logging.getLogger(name).level for name in named}
    conf.set_override("log_file", str(path))
    conf.set_override("debug", debug)
    config.setup_logging(conf, prog)
    try:
        yield lambda: path.read_text().splitlines() if path.exists() else []
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)
        sys.excepthook = excepthook
        for name, old in levels.items():
            logging.getLogger(name).setLevel(old)
        conf.clear_override("log_file")
        conf.clear_override("debug")


def request_ids(line):
    return REQUEST_ID.findall(line)
