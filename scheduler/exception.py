"""Errors the scheduler reports to its callers; each message says what to fix."""


class BerthError(Exception):
    """Base of the errors a caller is meant to read."""


class InvalidRequest(BerthError):
    """A request, report or update whose content is wrong; nothing was changed."""


class NoValidHost(BerthError):
    """No host passed the filters."""


class MaxAttemptsExceeded(NoValidHost):
    """An instance was tried on max_attempts hosts without success."""


class InstanceNotFound(BerthError):
    pass
