"""Finding and running the endpoint method a message names."""

import inspect

from scheduler.rpc.exceptions import InvalidArguments, NoSuchMethod


class Dispatcher:
    """Public methods (not starting with ``_``) of the endpoints, first match wins.

    The message's arguments are bound to the method's signature before it
    runs: a missing or unexpected argument raises InvalidArguments naming it,
    never a TypeError from inside the endpoint.
    """

    def __init__(self, endpoints):
        self.endpoints = list(endpoints)
        self._signatures = {}

    def lookup(self, method):
        if not method.startswith("_") and method.isidentifier():
            for endpoint in self.endpoints:
                func = getattr(endpoint, method, None)
                if callable(func):
                    return func
        raise NoSuchMethod(method)

    def _signature(self, method, func):
        signature = self._signatures.get(method)
        if signature is None:
            try:
                signature = inspect.signature(func)
            except (TypeError, ValueError):  # a builtin without one: let it check
                signature = False
            self._signatures[method] = signature
        return signature

    def dispatch(self, context, method, args):
        func = self.lookup(method)
        signature = self._signature(method, func)
        if signature:
            try:
                signature.bind(context, **args)
            except TypeError as exc:
                raise InvalidArguments(f"{method}: {exc}") from None
        return func(context, **args)
