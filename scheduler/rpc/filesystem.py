"""kombu's filesystem transport, made safe for several processes sharing one folder.

kombu names a message file ``<ms>_<uuid>.<queue>.msg`` and takes it by moving it
to the system temporary folder. Two changes:

* names start with a zero-padded nanosecond clock and a per-process counter, so
  that sorting the folder gives publishing order (kombu's millisecond prefix
  orders messages of the same millisecond at random);
* a consumer takes a file with ``os.rename`` into a folder on the same file
  system, which is atomic: of several processes polling a shared queue exactly
  one gets each message (``shutil.move`` to another file system copies, and two
  processes can both copy the same file).

Exchange bindings live in control-folder files (kombu's own design), so topic
and fanout routing work across processes.
"""

import itertools
import os
import threading
import time
import uuid
from queue import Empty

from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

_counter = itertools.count()
_counter_lock = threading.Lock()


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        with _counter_lock:
            seq = next(_counter)
        stamp = f"{time.time_ns():020d}{seq % 1000000:06d}-{uuid.uuid4().hex}"
        final = os.path.join(self.data_folder_out, f"{stamp}.{queue}.msg")
        tmp = os.path.join(self.data_folder_out, f".tmp-{stamp}")
        with open(tmp, "wb") as f:
            f.write(str_to_bytes(dumps(payload)))
        # Readers skip the dot-file; the rename publishes the whole message at once.
        os.rename(tmp, final)

    def _get(self, queue):
        wanted = f"{queue}.msg"
        for filename in sorted(os.listdir(self.data_folder_in)):
            if filename.startswith(".") or filename.partition(".")[2] != wanted:
                continue
            taken = os.path.join(self.processing_folder, filename)
            try:
                os.rename(os.path.join(self.data_folder_in, filename), taken)
            except FileNotFoundError:
                continue  # another consumer took it
            try:
                with open(taken, "rb") as f:
                    payload = f.read()
            finally:
                os.unlink(taken)
            return loads(bytes_to_str(payload))
        raise Empty()

    @property
    def processing_folder(self):
        return self.transport_options.get("processing_folder", self.data_folder_in)


class Transport(filesystem.Transport):
    Channel = Channel
