"""Checks of values decoded from JSON: RPC arguments and the requests they carry.

Each returns the value it accepts or raises InvalidRequest saying
``<subject> must be <what>``. The subject names the value as its caller
does, separator included: ``request_spec.instance_type.vcpus:``,
``set_fake_load: instance_uuids``.
"""

from berth_contract.errors import InvalidRequest

#: How much of a message that quotes the value refused is kept.
MAX_MESSAGE = 300


def is_integer(value):
    """An int that is not a bool (JSON ``true`` decodes to one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def integer(value, subject, low, high):
    if not is_integer(value):
        raise InvalidRequest(f"{subject} must be an integer, got {value!r}"[:MAX_MESSAGE])
    if not low <= value <= high:
        raise InvalidRequest(f"{subject} must be between {low} and {high}, got {value}"[:MAX_MESSAGE])
    return value


def json_object(value, subject, optional=True):
    """A dict; ``{}`` for None when ``optional``."""
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise InvalidRequest(f"{subject} must be an object, got {type(value).__name__}")
    return value


def sized_list(value, subject, low, high, items):
    """A list of ``low`` to ``high`` elements, which ``items`` names (``"instance UUIDs"``)."""
    if not isinstance(value, list) or not low <= len(value) <= high:
        count = f"at most {high}" if low == 0 else f"{low} to {high}"
        raise InvalidRequest(f"{subject} must be a list of {count} {items}")
    return value
