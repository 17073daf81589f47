"""Loaded, through PYTHONPATH, by the processes the clock tests start under libfaketime.

libfaketime 0.9.10 (Debian's) breaks ``time.sleep`` on Python 3.11 and newer when the
monotonic clock is left alone: Python sleeps with clock_nanosleep(CLOCK_MONOTONIC,
TIMER_ABSTIME), libfaketime shifts that absolute monotonic time by the fake offset and the
kernel answers EINVAL (wolfcw/libfaketime#426). A sleep of the same length through
select(), a relative timeout, is left alone.
"""

import select
import time


def _sleep(seconds: float) -> None:
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    select.select([], [], [], seconds)


time.sleep = _sleep
