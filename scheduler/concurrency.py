"""The one switch between native threads (the default) and eventlet.

``BERTH_CONCURRENCY=eventlet`` in the environment monkey-patches the standard
library before anything else of Berth is imported; every other module uses
plain ``threading``, ``queue`` and ``time`` and so runs unchanged in both
modes. Nothing outside this module imports eventlet.
"""

import os

ENV = "BERTH_CONCURRENCY"
MODES = ("threading", "eventlet")
MODE = os.environ.get(ENV, "").strip().lower() or "threading"

if MODE not in MODES:
    raise SystemExit(f"{ENV}={MODE!r} is not a concurrency mode; use one of {', '.join(MODES)}")

if MODE == "eventlet":
    import eventlet

    eventlet.monkey_patch()

import threading  # noqa: E402


def spawn(target, *args, name=None, **kwargs):
    """Run ``target(*args, **kwargs)`` in a daemon thread (green or native)."""
    thread = threading.Thread(target=target, args=args, kwargs=kwargs, name=name, daemon=True)
    thread.start()
    return thread
