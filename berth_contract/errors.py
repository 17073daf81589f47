"""The error a check of the contract raises: the content it was given is wrong.

These are :mod:`scheduler.exception`'s ``BerthError`` and ``InvalidRequest``, and keep its
module name: a refusal's reply names its class by module and name (oslo.messaging's failure
format), and that is ``scheduler.exception.InvalidRequest`` whichever side raised it.
"""


class BerthError(Exception):
    """Base of the errors a caller is meant to read."""

    __module__ = "scheduler.exception"


class InvalidRequest(BerthError):
    """A request, report or update whose content is wrong; nothing was changed."""

    __module__ = "scheduler.exception"

    #: The sender's fault: the RPC server logs it once, without a traceback.
    invalid_input = True
