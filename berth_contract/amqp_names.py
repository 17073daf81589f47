"""AMQP names (exchanges, queues, routing keys): text of at most 255 bytes in UTF-8.

A name is measured in bytes, as the wire measures it: 'é' * 200 is 200
characters but 400 bytes, too long for an AMQP short string. A lone
surrogate cannot be encoded at all.
"""

import re

MAX_BYTES = 255
#: ASCII control characters: no name, log line or text column should hold one (NUL, for one).
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def problem(name):
    """Why ``name`` cannot be an AMQP name, or None when it can."""
    if not isinstance(name, str):
        return f"not text but {type(name).__name__}"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "not valid text (it holds a lone surrogate)"
    if size > MAX_BYTES:
        return f"{size} bytes in UTF-8, over AMQP's {MAX_BYTES}"
    return None


def printable(text):
    """``text`` as valid UTF-8 text whatever it holds: a lone surrogate becomes its escape."""
    text = str(text)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def bounded(text, limit=MAX_BYTES):
    """``printable(text)`` cut to at most ``limit`` bytes of UTF-8."""
    return printable(text).encode("utf-8")[:limit].decode("utf-8", "ignore")
