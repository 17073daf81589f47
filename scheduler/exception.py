"""Errors the scheduler reports to its callers; each message says what to fix."""


class BerthError(Exception):
    """Base of the errors a caller is meant to read."""


class InvalidRequest(BerthError):
    """A request, report or update whose content is wrong; nothing was changed."""

    #: The sender's fault: the RPC server logs it once, without a traceback.
    invalid_input = True


class NotAuthorized(BerthError):
    """A message about a host sent by a broker user not registered for that host."""

    invalid_input = True

    def __init__(self, message, host=None, user=None):
        super().__init__(message)
        #: Rejections are logged once per host and user (and minute).
        self.log_key = ("not-authorized", host, user)


class NoValidHost(BerthError):
    """No host passed the filters."""

    def __init__(self, message, removed=()):
        super().__init__(message)
        #: [(filter name, hosts it removed)] when the filters refused every host, else empty.
        self.removed = tuple(removed)


class InstanceNotFound(BerthError):
    """The caller named an instance there is no record of: an answer, not a fault of Berth's."""

    invalid_input = True
