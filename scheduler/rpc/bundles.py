"""The casts of a bundle, as the server handles them: each as a message of its own.

A bundle (scheduler.rpc.envelope.bundle) is one broker message carrying several
casts. The server parses, checks, dispatches, dead-letters and settles each cast
alone; the broker knows only the bundle's message, which is acked once every cast
of it was settled, and handed back whole as soon as one of them is (its redelivery
is answered from what was committed, as any message's).
"""

from scheduler.rpc import envelope


class Bundle:
    """What is left to settle of one bundle's message."""

    __slots__ = ("message", "left", "handed_back")

    def __init__(self, message, count):
        self.message = message
        self.left = count
        self.handed_back = False

    def casts(self, msgs):
        return [BundledCast(self, msg) for msg in msgs]


class BundledCast:
    """One cast of a bundle: to the server, a message like any other (its delivery, its
    properties, its own body for a dead letter)."""

    __slots__ = ("bundle", "msg", "settled")

    content_type = "application/json"
    content_encoding = "utf-8"

    def __init__(self, bundle, msg):
        self.bundle = bundle
        self.msg = msg  # the inner request, decoded
        self.settled = False

    @property
    def delivery_info(self):
        return self.bundle.message.delivery_info

    @property
    def properties(self):
        return self.bundle.message.properties

    @property
    def headers(self):
        return self.bundle.message.headers

    @property
    def delivery_tag(self):
        return self.bundle.message.delivery_tag

    @property
    def channel(self):
        return self.bundle.message.channel

    @property
    def body(self):
        """The body this cast would have had alone (what its dead letter carries)."""
        return envelope.dumps(envelope.wrap(self.msg)).encode("utf-8")

    def settle(self):
        """Count this cast settled: the bundle's message once every cast of it is (to ack),
        else None."""
        bundle = self.bundle
        if self.settled or bundle.handed_back:
            return None
        self.settled = True
        bundle.left -= 1
        return bundle.message if bundle.left == 0 else None

    def ack(self, multiple=False):
        message = self.settle()
        if message is not None:
            message.ack(multiple=multiple)

    def requeue(self):
        bundle = self.bundle
        if not bundle.handed_back:
            bundle.handed_back = True
            bundle.message.requeue()
