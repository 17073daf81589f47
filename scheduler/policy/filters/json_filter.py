"""JsonFilter: a ``query`` scheduler hint in Nova's JSON syntax over host attributes.

``["and", [">=", "$free_ram_mb", 1024], ["in", "$hypervisor_type", "fake", "kvm"]]``:
the operators are ``=``, ``<``, ``>``, ``<=``, ``>=``, ``in``, ``not``,
``or`` and ``and``; ``$name`` reads an attribute of Nova's HostState
(scheduler.policy.host_attributes: ``$free_disk_mb``, ``$hypervisor_version``,
``$hypervisor_hostname``...), and ``$name.key`` walks into a dict
(``$metrics.cpu.percent``). An attribute the host lacks drops out of the
arguments, as in Nova. A query that is not valid JSON, or uses an unknown
operator, is refused before anything is placed.

Per host only: the query is a program, not a column expression.
"""

import functools
import json
import operator

import numpy as np

from scheduler.policy import filters, host_attributes


class InvalidQuery(ValueError):
    pass


def _compare(op, args):
    if len(args) < 2:
        return False
    try:
        if op is operator.contains:
            return args[0] in args[1:]
        return all(op(args[0], other) for other in args[1:])
    except TypeError:
        return False


_COMMANDS = {
    "=": functools.partial(_compare, operator.eq),
    "<": functools.partial(_compare, operator.lt),
    ">": functools.partial(_compare, operator.gt),
    "<=": functools.partial(_compare, operator.le),
    ">=": functools.partial(_compare, operator.ge),
    "in": functools.partial(_compare, operator.contains),
    "not": lambda args: [not arg for arg in args],
    "or": any,
    "and": all,
}


def _variable(text, host_state):
    if not text:
        return None  # dropped from the arguments, as Nova drops it
    if not text.startswith("$"):
        return text
    path = text[1:].split(".")
    value = host_attributes.lookup(host_state, path[0])
    if path[0] == "metrics" and len(path) > 1:  # metric names hold dots themselves
        return value.get(".".join(path[1:])) if isinstance(value, dict) else None
    for item in path[1:]:
        value = value.get(item) if isinstance(value, dict) else None
    return value


def evaluate(query, host_state):
    if not query:
        return True
    if not isinstance(query, list) or query[0] not in _COMMANDS:
        raise InvalidQuery(f"unknown operator in {query!r}"[:200])
    args = []
    for arg in query[1:]:
        if isinstance(arg, list):
            arg = evaluate(arg, host_state)
        elif isinstance(arg, str):
            arg = _variable(arg, host_state)
        if arg is not None:
            args.append(arg)
    return _COMMANDS[query[0]](args)


@functools.lru_cache(maxsize=64)
def parse(text):
    try:
        query = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise InvalidQuery(f"query is not JSON: {exc}") from None
    if query and not isinstance(query, list):
        raise InvalidQuery("query must be a JSON list")
    _check_operators(query)
    return json.dumps(query)


def _check_operators(query):
    """Refuse an operator Nova's JsonFilter does not know, anywhere in the query."""
    if not query:
        return
    if not isinstance(query[0], str) or query[0] not in _COMMANDS:
        raise InvalidQuery(f"unknown operator {json.dumps(query[0])[:50]}: use one of {' '.join(_COMMANDS)}")
    for arg in query[1:]:
        if isinstance(arg, list):
            _check_operators(arg)


class JsonFilter(filters.BaseHostFilter):
    run_filter_once_per_request = True
    reads_hints = ("query",)

    def check_hints(self, spec):
        """Refuse a query hint that is not a JSON list (ValueError says why)."""
        try:
            self._query(spec)
        except InvalidQuery as exc:
            raise ValueError(f"scheduler hint query: {exc}") from None

    @staticmethod
    def _query(spec):
        """The parsed query hint, None without one; InvalidQuery when it is malformed."""
        text = spec.scheduler_hints.get("query")
        if not text:
            return None
        return json.loads(parse(text if isinstance(text, str) else json.dumps(text)))

    @staticmethod
    def _passes(query, host_state):
        try:
            result = evaluate(query, host_state)
        except InvalidQuery:
            return False
        return bool(any(result) if isinstance(result, list) else result)

    def host_passes(self, host_state, spec):
        try:
            query = self._query(spec)
        except InvalidQuery:
            return False
        return query is None or self._passes(query, host_state)

    def filter_vector(self, table, rows, spec):
        # The query is a program over host attributes: parsed once, then run host by host.
        try:
            query = self._query(spec)
        except InvalidQuery:
            return False
        if query is None:
            return True
        return np.fromiter((self._passes(query, view) for view in table.views(table.row_numbers(rows))),
                           dtype=bool)
