"""kombu's filesystem transport, made safe for several processes sharing one folder.

kombu names a message file ``<ms>_<uuid>.<queue>.msg``, takes it by moving it to
the system temporary folder, reads it and deletes it: from then on the message
lives only in the memory of the process that took it. Handing it back (a requeue,
or the channel closing with it unacknowledged) writes it anew, which a full disk
refuses (kombu then logs "UNABLE TO RESTORE" and dumps it to a file); a process
that dies loses it. Here:

* names start with a zero-padded nanosecond clock and a per-process counter, so
  that sorting the folder gives publishing order (kombu's millisecond prefix
  orders messages of the same millisecond at random);
* a message published with an expiration (a call: its caller's timeout) that is
  taken after it has expired is deleted, with a warning, not delivered, as RabbitMQ
  drops it: a call its caller stopped waiting for is never run later behind its back;
* a consumer takes a file with ``os.rename`` into a folder of its own process on
  the same file system, which is atomic: of several processes polling a shared
  queue exactly one gets each message;
* the file stays there until the message is acknowledged. Handing it back renames
  it back (marked redelivered): it needs no free space and cannot fail for the
  lack of it. A process that finds the folder of a process that is gone (its lock
  is free) gives that one's messages back to their queues, as a broker does with
  the unacknowledged messages of a connection that closed.

Exchange bindings live in control-folder files (kombu's own design), so topic
and fanout routing work across processes. A queue named in the transport option
``bounded_queues`` (``{name: (max messages, max bytes)}``: the dead letters) keeps
the newest messages within its bounds: whoever publishes past them deletes the
oldest files, as RabbitMQ's ``x-overflow: drop-head`` does.
"""

import atexit
import contextlib
import fcntl
import itertools
import logging
import os
import shutil
import threading
import time
import uuid
from collections import defaultdict
from queue import Empty

from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

LOG = logging.getLogger(__name__)
#: The transport option of the queues kept within bounds.
BOUNDED_QUEUES = "bounded_queues"

_counter = itertools.count()
_counter_lock = threading.Lock()
#: Marks the name of a message handed back: it is delivered again with ``redelivered`` set.
REDELIVERED = "-r"
_LOCK = ".lock"


class _Processing:
    """This process's folder of taken messages, under ``root``, locked while the process lives."""

    _lock = threading.Lock()
    _mine = {}  # (root, pid) -> folder
    _locks = []  # the open lock files, held until the process ends

    @classmethod
    def folder(cls, root, queues):
        key = (root, os.getpid())
        with cls._lock:
            found = cls._mine.get(key)
            if found is None:
                os.makedirs(root, exist_ok=True)
                _give_back_orphans(root, queues)
                found = os.path.join(root, uuid.uuid4().hex)
                os.makedirs(found)
                lock = open(os.path.join(found, _LOCK), "w")  # noqa: SIM115 - held for the process's life
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                cls._mine[key] = found
                cls._locks.append(lock)
                atexit.register(_remove_if_empty, found)
            return found


def _remove_if_empty(folder):
    """At exit: a folder holding no message taken is of no use to anyone."""
    with contextlib.suppress(OSError):
        if os.listdir(folder) == [_LOCK]:
            shutil.rmtree(folder)


def _give_back_orphans(root, queues):
    """Put the messages that processes now gone had taken back in their queues."""
    given = 0
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if name.startswith("."):
            continue
        if not os.path.isdir(path):
            given += _give_back(path, queues)  # taken by a version that kept no folder per process
            continue
        try:
            lock = open(os.path.join(path, _LOCK))  # noqa: SIM115 - closed below
        except FileNotFoundError:
            continue  # another process is giving it back, or it is being made
        with lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its process is alive
            for message in sorted(os.listdir(path)):
                if message != _LOCK:
                    given += _give_back(os.path.join(path, message), queues)
            shutil.rmtree(path, ignore_errors=True)
    if given:
        LOG.warning("Gave back %d message(s) that a process gone before acknowledging them had taken; they "
                    "are delivered again", given)


def _give_back(path, queues):
    stamp, dot, rest = os.path.basename(path).partition(".")
    if not dot or not rest.endswith(".msg"):
        return 0
    if not stamp.endswith(REDELIVERED):
        stamp += REDELIVERED
    with contextlib.suppress(FileNotFoundError):
        os.rename(path, os.path.join(queues, f"{stamp}.{rest}"))
        return 1
    return 0


def _expired_for(stamp, payload):
    """(seconds since it expired, its time to live in seconds) of a message whose
    expiration (milliseconds, as AMQP's) has passed since its file's stamp; else None."""
    expiration = payload.get("properties", {}).get("expiration")
    if expiration is None:
        return None
    try:
        ttl = float(expiration) / 1000
        sent = int(stamp[:20]) / 1e9
    except ValueError:
        return None
    late = time.time() - sent - ttl
    return (late, ttl) if late > 0 else None


class Channel(filesystem.Channel):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._taken = defaultdict(list)  # delivery tag -> files of the messages taken, until settled

    def _put(self, queue, payload, **kwargs):
        with _counter_lock:
            seq = next(_counter)
        stamp = f"{time.time_ns():020d}{seq % 1000000:06d}-{uuid.uuid4().hex}"
        final = os.path.join(self.data_folder_out, f"{stamp}.{queue}.msg")
        tmp = os.path.join(self.data_folder_out, f".tmp-{stamp}")
        try:
            with open(tmp, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # a half-written message on a full disk
            raise
        # Readers skip the dot-file; the rename publishes the whole message at once.
        os.rename(tmp, final)
        bounds = self.transport_options.get(BOUNDED_QUEUES, {}).get(queue)
        if bounds is not None:
            self._drop_head(queue, *bounds)

    def _drop_head(self, queue, max_length, max_bytes):
        """Delete the oldest messages of ``queue`` past ``max_length`` messages or
        ``max_bytes`` (their files' sizes); what another process took or deleted meanwhile
        is skipped."""
        wanted = f"{queue}.msg"
        files = []
        for filename in sorted(os.listdir(self.data_folder_out), reverse=True):  # newest first
            if filename.startswith(".") or filename.partition(".")[2] != wanted:
                continue
            try:
                files.append((filename, os.path.getsize(os.path.join(self.data_folder_out, filename))))
            except FileNotFoundError:
                continue
        kept = total = 0
        for filename, size in files:
            if kept < max_length and total + size <= max_bytes:
                kept += 1
                total += size
                continue
            kept = max_length  # the first one past the bounds: it and every older one go
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self.data_folder_out, filename))

    def _get(self, queue):
        wanted = f"{queue}.msg"
        processing = _Processing.folder(self.processing_folder, self.data_folder_in)
        for filename in sorted(os.listdir(self.data_folder_in)):
            stamp, _, rest = filename.partition(".")
            if filename.startswith(".") or rest != wanted:
                continue
            taken = os.path.join(processing, filename)
            try:
                os.rename(os.path.join(self.data_folder_in, filename), taken)
            except FileNotFoundError:
                continue  # another consumer took it
            try:
                with open(taken, "rb") as f:
                    payload = loads(bytes_to_str(f.read()))
            except ValueError as exc:
                aside = os.path.join(self.processing_folder, f".unreadable-{filename}")
                os.rename(taken, aside)
                LOG.error("Message file %s of queue %s cannot be read (%s); moved to %s", filename, queue,
                          exc, aside)
                continue
            expired = _expired_for(stamp, payload)
            if expired is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(taken)
                LOG.warning("Dropped a message of queue %s: its caller stopped waiting for it %.1f s ago "
                            "(it expired %.1f s after it was sent, and nothing took it before)", queue,
                            *expired)
                continue
            if stamp.endswith(REDELIVERED):
                payload["properties"].setdefault("delivery_info", {})["redelivered"] = True
            self._taken[payload["properties"]["delivery_tag"]].append(taken)
            return payload
        raise Empty()

    def _settled(self, delivery_tag):
        files = self._taken.get(delivery_tag)
        if not files:
            return None
        taken = files.pop(0)
        if not files:
            del self._taken[delivery_tag]
        return taken

    def basic_ack(self, delivery_tag, multiple=False):
        super().basic_ack(delivery_tag, multiple)
        taken = self._settled(delivery_tag)
        if taken is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(taken)

    def basic_reject(self, delivery_tag, requeue=False):
        super().basic_reject(delivery_tag, requeue)  # a requeue goes through _restore
        if not requeue:
            taken = self._settled(delivery_tag)
            if taken is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(taken)

    def _restore(self, message):
        """Hand a message back: its file goes back to the queue it was taken from."""
        taken = self._settled(message.delivery_tag)
        if taken is None:
            super()._restore(message)
        else:
            _give_back(taken, self.data_folder_in)

    @property
    def processing_folder(self):
        return self.transport_options.get("processing_folder") or os.path.join(self.data_folder_in,
                                                                               ".processing")


class Transport(filesystem.Transport):
    Channel = Channel
