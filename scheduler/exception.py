"""Errors the scheduler reports to its callers; each message says what to fix.

BerthError and InvalidRequest are the contract's (berth_contract.errors): its checks raise them.
"""

from berth_contract.errors import BerthError, InvalidRequest

__all__ = ["BerthError", "InstanceNotFound", "InvalidRequest", "NoValidHost", "NotAuthorized", "PowerRefused"]


class NotAuthorized(BerthError):
    """A message from a broker user whose role may not call its method (scheduler.rpc.access)."""

    invalid_input = True

    def __init__(self, message, method=None, user=None, role=None):
        super().__init__(message)
        self.method, self.user, self.role = method, user, role
        #: Refusals are logged once per method and user (and minute).
        self.log_key = ("not-authorized", method, user)


class NoValidHost(BerthError):
    """No host passed the filters."""

    def __init__(self, message, removed=()):
        super().__init__(message)
        #: [(filter name, hosts it removed)] when the filters refused every host, else empty.
        self.removed = tuple(removed)


class InstanceNotFound(BerthError):
    """The caller named an instance there is no record of: an answer, not a fault of Berth's."""

    invalid_input = True


class PowerRefused(BerthError):
    """A stop, start or reboot the instance cannot take as it is (its state, its host, its driver);
    the message says why. Nothing was changed."""

    invalid_input = True
