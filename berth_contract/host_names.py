"""Host names: each names the queues of its agent (``compute.<host>``) and rows in
the database, so it must be text that both can hold."""

from berth_contract import amqp_names as names
from berth_contract.errors import InvalidRequest

#: ``compute.<host>`` and any other queue named after a host must fit AMQP's
#: 255-byte names, with room for the topic.
MAX_BYTES = 200


def problem(value):
    """Why ``value`` cannot be a host name, or None when it can."""
    if not isinstance(value, str) or not value:
        return "must be a non-empty string"
    why = names.problem(value)
    if why is not None and "bytes" not in why:
        return f"is {why}"
    size = len(value.encode("utf-8"))
    if size > MAX_BYTES:
        return (f"is {size} bytes in UTF-8, over {MAX_BYTES}: the host's queues are named after it, "
                f"and AMQP names are at most {names.MAX_BYTES} bytes")
    if names.CONTROL.search(value):
        return "holds control characters"
    return None


def check(value, where):
    """``value`` if it is a usable host name; raises InvalidRequest naming ``where``
    (e.g. ``instance_update: host``)."""
    why = problem(value)
    if why is None:
        return value
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"{where} {why}, got {value!r}"[:200])
    raise InvalidRequest(f"{where} {names.printable(value)[:60]!r} {why}")
