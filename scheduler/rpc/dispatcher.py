"""Finding and running the endpoint method a message names."""

import inspect

from berth_contract import versions
from scheduler.rpc import roles
from scheduler.rpc.exceptions import InvalidArguments, NoSuchMethod, UnsupportedVersion


def batch_of(method):
    """Mark an endpoint function as the batch form of its RPC method ``method``.

    The server calls it with ``[(context, kwargs), ...]``, one pair per message
    of a batch naming ``method`` (their arguments already bound to the
    method's signature), and it returns one outcome per pair, in order: what
    the method would have returned, or the exception it would have raised.
    It must behave as calling the method once per message would.
    """

    def mark(func):
        func.berth_batch_of = method
        return func

    return mark


def read_only(func):
    """Mark an endpoint method as one that writes nothing to the database: a unit of
    work runs it without a savepoint of its own (see RPCServer)."""
    func.berth_read_only = True
    return func


class Dispatcher:
    """Public methods (not starting with ``_``) of the endpoints, first match wins.

    An endpoint serves the versions of its ``RPC_API`` (berth_contract.versions.API;
    without one, 1.0): a message asking for a version it does not serve raises
    UnsupportedVersion naming both, before anything else is checked. Unlike
    oslo.messaging, which looks for an endpoint serving the version first, the
    endpoint is the first one that has the method, so that the refusal says which
    version of which API it serves.

    The message's arguments are bound to the method's signature before it
    runs: a missing or unexpected argument raises InvalidArguments naming it,
    never a TypeError from inside the endpoint. With an ``access`` policy
    (scheduler.rpc.access.Access), every public method must declare its callers
    (scheduler.rpc.roles: ValueError otherwise), and a message whose sender may
    not call its method raises NotAuthorized before the method runs.

    With ``methods``, only those methods are served: a message naming another one is refused
    as one naming no method (a queue taken for some of the endpoints' methods only).
    """

    def __init__(self, endpoints, access=None, methods=None):
        self.endpoints = list(endpoints)
        self.access = access
        self.methods = None if methods is None else frozenset(methods)
        if access is not None:
            missing = roles.undeclared(self.endpoints)
            if missing:
                raise ValueError(f"RPC methods that declare no callers: {', '.join(missing)}; declare "
                                 "who may call each with @rpc.callers(...)")
        self._signatures = {}
        self._batch_forms = {}
        for endpoint in reversed(self.endpoints):  # the first endpoint's form wins
            for name in dir(type(endpoint)):
                method = getattr(getattr(type(endpoint), name), "berth_batch_of", None)
                if method is not None and callable(getattr(endpoint, method, None)) and (
                        self.methods is None or method in self.methods):
                    self._batch_forms[method] = (endpoint, getattr(endpoint, name))

    def _find(self, method, version=None):
        """(endpoint, bound method) of ``method``: the first endpoint that has it and serves
        ``version`` (an API served at two major versions has an endpoint for each), else the
        first that has it."""
        found = None
        if not method.startswith("_") and method.isidentifier() and (
                self.methods is None or method in self.methods):
            for endpoint in self.endpoints:
                func = getattr(endpoint, method, None)
                if callable(func):
                    if version is None or _serves(endpoint, version):
                        return endpoint, func
                    found = found or (endpoint, func)
        if found is None:
            raise NoSuchMethod(method)
        return found

    def lookup(self, method):
        return self._find(method)[1]

    def batch_form(self, method):
        """The batch form of ``method`` (see batch_of), or None."""
        endpoint, form = self._batch_forms.get(method, (None, None))
        if form is None or getattr(self.lookup(method), "__self__", None) is not endpoint:
            return None  # none, or the method is another endpoint's (first match wins)
        return form

    def is_read_only(self, method):
        """Whether the endpoint method ``method`` is marked read_only (False if unknown)."""
        try:
            return getattr(self.lookup(method), "berth_read_only", False)
        except NoSuchMethod:
            return False

    def _signature(self, func):
        """(signature or False, (required names, accepted names) or None) of ``func``.

        The names are given for a signature of plain parameters after the
        context: the arguments fit when they lie between the two, which is
        told without binding them.
        """
        key = getattr(func, "__func__", func)
        found = self._signatures.get(key)
        if found is None:
            try:
                signature = inspect.signature(func)
            except (TypeError, ValueError):  # a builtin without one: let it check
                found = (False, None)
            else:
                found = (signature, _names(signature))
            self._signatures[key] = found
        return found

    def check(self, context, method, args):
        """The endpoint method for a message; raises unless its endpoint serves the version
        the message asks for (``context.version``), ``args`` fit the method's signature and
        the message's sender may call it."""
        version = getattr(context, "version", versions.DEFAULT)
        endpoint, func = self._find(method, version)
        if not _serves(endpoint, version):
            api = getattr(endpoint, "RPC_API", None)
            served = versions.DEFAULT if api is None else api.version
            raise UnsupportedVersion(version, method, served, getattr(api, "name", None))
        signature, names = self._signature(func)
        if signature and (names is None or not names[0] <= args.keys() <= names[1]):
            try:
                signature.bind(context, **args)
            except TypeError as exc:
                raise InvalidArguments(f"{method}: {exc}") from None
        if self.access is not None:
            self.access.check(getattr(context, "user_id", None), method, roles.declared(func), args)
        return func

    def dispatch(self, context, method, args):
        return self.check(context, method, args)(context, **args)


def _serves(endpoint, version):
    """Whether ``endpoint`` serves ``version`` of its RPC_API (without one: 1.0)."""
    api = getattr(endpoint, "RPC_API", None)
    served = versions.DEFAULT if api is None else api.version
    return version == served or versions.is_compatible(served, version)


def _names(signature):
    """(required, accepted) keyword names after the first parameter, or None when
    the signature has anything but plain parameters."""
    parameters = list(signature.parameters.values())
    if not parameters or any(p.kind is not p.POSITIONAL_OR_KEYWORD for p in parameters):
        return None
    rest = parameters[1:]
    return (frozenset(p.name for p in rest if p.default is p.empty), frozenset(p.name for p in rest))
