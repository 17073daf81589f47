"""The exceptions the RPC API raises to its callers."""


class MessagingException(Exception):
    """Base of every error of :mod:`scheduler.rpc`."""


class MessagingTimeout(MessagingException):
    """No reply to a call arrived within its timeout."""


class MessageDeliveryFailure(MessagingException):
    """A message could not be handed to the broker (after the allowed retries)."""


class BrokerUnreachable(MessagingException):
    """The message broker could not be reached, or refused the connection: one line
    that says which, naming the broker's URL with the password masked."""


class LoginRefused(BrokerUnreachable):
    """The message broker refused the login: trying again with the same credentials cannot help."""


class InvalidName(MessageDeliveryFailure, ValueError):
    """An exchange or routing key that AMQP cannot carry (see scheduler.rpc.names):
    the message is refused before anything is sent, and sending it again cannot help."""


class RemoteError(MessagingException):
    """The remote endpoint of a call raised; carries its class, message and traceback."""

    def __init__(self, exc_type=None, value=None, traceback=None):
        self.exc_type = exc_type or "Exception"
        self.value = "" if value is None else value
        self.traceback = traceback or ""
        super().__init__(self.exc_type, self.value, self.traceback)

    def __str__(self):
        return f"{self.exc_type}: {self.value}"


class NoSuchMethod(MessagingException, AttributeError):
    """A message named a method that no endpoint of the server exposes."""

    #: The sender's fault, not ours: logged once as a warning, without a traceback.
    invalid_input = True

    def __init__(self, method):
        self.method = method
        super().__init__(method)

    def __str__(self):
        return f"Endpoint does not support RPC method {self.method}"


class InvalidEnvelope(MessagingException, ValueError):
    """A message body is not an oslo.messaging 2.0 envelope we can read."""

    invalid_input = True


class InvalidArguments(MessagingException, TypeError):
    """A message's arguments do not match its method: one missing, or one it does not take."""

    invalid_input = True


class MessageTooLarge(MessageDeliveryFailure, ValueError):
    """A message body is larger than ``[oslo_messaging_rabbit] max_message_bytes``: refused by
    a server that receives it, and not sent by a Berth client."""

    invalid_input = True


class RetryLater(MessagingException):
    """Raised by a unit of work's step: the failure is passing (a deadlock, a lost
    database): hand the whole batch back for redelivery instead of refusing the message.
    ``soon``: it lost a race (a deadlock) and may be run again without waiting."""

    def __init__(self, message, soon=False):
        super().__init__(message)
        self.soon = soon


class ServiceUnavailable(MessagingException):
    """The answer to a call that arrived while the service holds its messages through a
    passing failure (its database away): nothing was done; the caller may try again."""


class WorkBroken(MessagingException):
    """Raised by a unit of work's step: the unit of work cannot go on (a database
    error outside a savepoint aborted its transaction). The batch is rolled back
    and its messages handled again one by one."""


class QueueInUse(MessagingException):
    """An exclusive server's own queue is consumed by another process already."""


class DeliveryLimitExceeded(MessagingException):
    """A message took down the worker handling it ``delivery_limit`` times: dead-lettered."""
