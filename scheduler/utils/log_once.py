"""Logging a line that may repeat many times a second at most once a minute."""

import threading
import time


class LogOnce:
    """Log each distinct line at most once per ``interval`` seconds.

    ``log(key, level, fmt, *args)``: a key seen within the interval is only
    counted; the next line logged for it says how many were suppressed.
    """

    def __init__(self, logger, interval=60.0, max_keys=10_000):
        self._logger = logger
        self._interval = interval
        self._max_keys = max_keys
        self._lock = threading.Lock()
        self._seen = {}  # key -> [last logged (monotonic), suppressed count]

    def log(self, key, level, fmt, *args):
        now = time.monotonic()
        with self._lock:
            entry = self._seen.get(key)
            if entry is not None and now - entry[0] < self._interval:
                entry[1] += 1
                return False
            suppressed = entry[1] if entry is not None else 0
            if len(self._seen) >= self._max_keys:
                self._seen = {k: v for k, v in self._seen.items() if now - v[0] < self._interval}
                if len(self._seen) >= self._max_keys:
                    self._seen.clear()
            self._seen[key] = [now, 0]
        if suppressed:
            fmt += " (%d more like it in the last %.0f s)"
            args += (suppressed, self._interval)
        self._logger.log(level, fmt, *args)
        return True
