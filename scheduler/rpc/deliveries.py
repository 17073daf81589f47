"""How many times a worker stopped while handling a message: kept on disk.

A message that kills the process handling it comes back, redelivered, to the
next worker, which would die in turn, for ever. So a redelivered message is
handled alone, and before it is handled its count goes up by one on disk;
once it is settled (done, answered, acknowledged) its entry goes. An entry
left behind is a worker that stopped while handling that message alone; once
a message has ``limit`` of them it is dead-lettered instead of handled.
Messages a worker had received but not started on are not counted.

The counts are this machine's: a message that kills every worker is
dead-lettered once each machine's count reaches the limit. On quorum queues
RabbitMQ counts deliveries too (x-delivery-limit, see topology).
"""

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import tempfile
import time

LOG = logging.getLogger(__name__)

#: Entries older than this are forgotten: their message was settled elsewhere.
FORGET_AFTER = 7 * 24 * 3600


def fingerprint(message):
    """What identifies a message across its deliveries: its body."""
    body = message.body if isinstance(message.body, bytes) else str(message.body).encode("utf-8", "replace")
    return hashlib.sha256(body).hexdigest()


class DeliveryLog:
    """Counts in one small JSON file, ``{fingerprint: [count, first time]}``, shared
    (under an flock) by the workers of one machine that use the same path."""

    def __init__(self, path):
        self.path = path

    def begin(self, key):
        """Count one more attempt at handling ``key`` alone; the count before it."""
        with self._counts() as counts:
            count, since = counts.get(key, (0, time.time()))
            counts[key] = [count + 1, since]
        return count

    def end(self, key):
        """``key`` is settled: forget it."""
        with self._counts() as counts:
            counts.pop(key, None)

    @contextlib.contextmanager
    def _counts(self):
        directory = os.path.dirname(self.path)
        os.makedirs(directory, exist_ok=True)
        with open(self.path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                with open(self.path, encoding="utf-8") as f:
                    counts = json.load(f)
                if not isinstance(counts, dict):
                    raise ValueError("not an object")
            except FileNotFoundError:
                counts = {}
            except ValueError as exc:
                LOG.warning("Delivery counts %s unreadable (%s); starting again", self.path, exc)
                counts = {}
            before = dict(counts)
            yield counts
            now = time.time()
            counts = {k: v for k, v in counts.items() if now - v[1] < FORGET_AFTER}
            if counts != before:
                self._write(directory, counts)

    def _write(self, directory, counts):
        fd, tmp = tempfile.mkstemp(prefix=".deliveries.", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(counts, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
