"""Finding and running the endpoint method a message names."""

from scheduler.rpc.exceptions import NoSuchMethod


class Dispatcher:
    """Public methods (not starting with ``_``) of the endpoints, first match wins."""

    def __init__(self, endpoints):
        self.endpoints = list(endpoints)

    def lookup(self, method):
        if not method.startswith("_"):
            for endpoint in self.endpoints:
                func = getattr(endpoint, method, None)
                if callable(func):
                    return func
        raise NoSuchMethod(method)

    def dispatch(self, context, method, args):
        return self.lookup(method)(context, **args)
