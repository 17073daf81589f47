"""The ``berth`` program's entry point: Ctrl-C is one line and status 130 from its first instant.

Python raises KeyboardInterrupt wherever the interpreter is, the command line's imports included
(a few tenths of a second); this module imports nothing of Berth's but the command line itself,
after it has said how an interrupt ends. A second Ctrl-C within a second of the first (a
terminal's repeat, or ``timeout`` signalling the process and its group) is taken as the same one,
and once interrupted the process ignores SIGINT on its way out: Python gives SIGINT back its
default action while it finalizes, which would end the process by the signal, not status 130.
"""

import importlib
import signal
import sys
import time

PROG = "berth"
_AGAIN = 1.0  # seconds within which a second SIGINT is the first one's echo

_first = []


def _interrupted(signum, frame):
    now = time.monotonic()
    if _first and now - _first[0] < _AGAIN:
        return
    _first[:] = [now]
    raise KeyboardInterrupt


def main(argv=None):
    signal.signal(signal.SIGINT, _interrupted)
    try:
        try:
            cli = importlib.import_module("scheduler.cmd.cli")  # not an import statement: see above
        except KeyboardInterrupt:
            print(f"{PROG}: interrupted", file=sys.stderr)
            return 130
        return cli.main(argv)
    finally:
        if _first:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
