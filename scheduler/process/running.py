"""What every long-running Berth program does around its services until it is signalled."""

import gc
import logging
import signal
import threading

from scheduler.process import startup

LOG = logging.getLogger(__name__)


# A young-generation collection every 700 allocations is the interpreter's
# default; a batch of messages allocates hundreds of thousands of short-lived
# objects, nearly all freed by reference counting, so collections that often
# cost more than the cycles they find.
YOUNG_COLLECTION_EVERY = 50_000


def settle_garbage_collector():
    """Collect once, then leave what start-up built (modules, metadata, the host
    table) out of every later collection, and collect young objects less often."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, older, oldest)


def on_hangup(signum, frame):
    """SIGHUP: open the log file again (after logrotate); options are read at start only."""
    startup.reopen_logs()
    LOG.info("Received SIGHUP: log file opened again; other options are read at start only, "
             "restart to change them")


def run_until_signalled(services, transport=None):
    """Start ``services`` in order, wait for SIGTERM or SIGINT, stop them in reverse;
    SIGHUP opens the log file again. A second SIGTERM or SIGINT is only logged.

    With ``transport``, wait for its broker first, for as long as it takes or until
    signalled; raises rpc.LoginRefused should the broker refuse the login."""
    stop = threading.Event()

    def handler(signum, frame):
        if stop.is_set():
            LOG.info("Received %s again: already draining and stopping", signal.Signals(signum).name)
            return
        LOG.info("Received %s: draining and stopping", signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, on_hangup)
    started = []
    try:
        if transport is not None and not transport.wait_for_broker(stop):
            return
        for service in services:
            service.start()
            started.append(service)
        settle_garbage_collector()
        while not stop.wait(1.0):
            pass
    finally:
        for service in reversed(started):
            service.stop()
        for signum, old in previous.items():
            signal.signal(signum, old)
