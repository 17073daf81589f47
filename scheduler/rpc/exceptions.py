"""The exceptions the RPC API raises to its callers."""

from berth_contract import versions


class MessagingException(Exception):
    """Base of every error of :mod:`scheduler.rpc`."""


class MessagingTimeout(MessagingException):
    """No reply to a call arrived within its timeout."""


class NoConsumer(MessagingException):
    """A call was not sent: the broker says nothing consumes the queue it would go to, so no
    reply could come. Says which queue, on which broker (its URL's password masked)."""

    def __init__(self, queue: str, url: str):
        super().__init__(f"nothing is consuming queue {queue!r} on {url}")
        self.queue = queue
        self.url = url


class MessageDeliveryFailure(MessagingException):
    """A message could not be handed to the broker (after the allowed retries)."""


class NoQueue(MessageDeliveryFailure):
    """A message sent ``mandatory`` that the broker routed to no queue and returned: no queue
    is bound to its exchange with its routing key (on RabbitMQ a queue exists once a server
    declared it), so nothing holds it and nothing will run it. Says which exchange, routing
    key and broker (its URL's password masked)."""

    def __init__(self, exchange: str, routing_key: str, url: str):
        super().__init__(f"no queue is bound to exchange {exchange!r} with routing key {routing_key!r} "
                         f"on {url}: the broker returned the message, nothing holds it")
        self.exchange = exchange
        self.routing_key = routing_key
        self.url = url


class BrokerUnreachable(MessagingException):
    """The message broker could not be reached, or refused the connection: one line
    that says which, naming the broker's URL with the password masked."""


class LoginRefused(BrokerUnreachable):
    """The message broker refused the login: trying again with the same credentials cannot help."""


class InvalidName(MessageDeliveryFailure, ValueError):
    """An exchange or routing key that AMQP cannot carry (see berth_contract.amqp_names):
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


class UnsupportedVersion(MessagingException):
    """A message asks for a version of its API that the endpoint does not serve: a newer
    minor version, or another major one (oslo.messaging's UnsupportedVersion). The message
    names both versions, and the ``[upgrade_levels]`` option that caps the sender."""

    invalid_input = True

    def __init__(self, version, method, served, api=None):
        self.version = version
        self.method = method
        self.served = served
        self.api = api
        super().__init__(version, method, served)

    def __str__(self):
        text = (f"Endpoint does not support RPC version {self.version}. Attempted method: {self.method}; "
                f"it serves {f'the {self.api} API' if self.api else 'its API'} up to {self.served}")
        if self.api and versions.parse(self.version) > versions.parse(self.served):
            text += (f": set [upgrade_levels] {self.api} = {self.served} where it is sent from, until this "
                     "is upgraded")
        return text


class RPCVersionCapError(MessagingException):
    """A message needs a version of its API above the client's version cap (``[upgrade_levels]``,
    oslo.messaging's RPCVersionCapError): refused by the client, nothing sent."""

    def __init__(self, method, version, version_cap, api=None):
        self.method = method
        self.version = version
        self.version_cap = version_cap
        self.api = api
        super().__init__(method, version, version_cap)

    def __str__(self):
        if self.api:
            return (f"{self.method} needs version {self.version} of the {self.api} API, above its cap "
                    f"[upgrade_levels] {self.api} = {self.version_cap}: not sent. Raise the cap once every "
                    f"server of the {self.api} API serves {self.version}")
        return (f"{self.method} needs version {self.version}, above this client's cap {self.version_cap}: "
                "not sent")


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
