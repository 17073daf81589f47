"""The request context an endpoint method receives as its first argument."""


class Context:
    """The caller's ``ctxt`` dict (``values``) plus what the broker says about the message.

    ``user_id`` is the AMQP ``user_id`` property: RabbitMQ checks it against the
    publishing connection's user, so it can be trusted on rabbit:// (it is None on
    the other transports and when the publisher did not set it). ``redelivered``
    tells that the broker delivered the message before without an ack. A call
    also carries ``msg_id`` and ``reply_q``; both are None for a cast, and for a
    call whose reply cannot be sent, which says why in ``unanswerable``.
    """

    def __init__(self, values=None, user_id=None, redelivered=False, msg_id=None, reply_q=None,
                 unanswerable=None):
        self.values = dict(values or {})
        self.user_id = user_id
        self.redelivered = bool(redelivered)
        self.msg_id = msg_id
        self.reply_q = reply_q
        self.unanswerable = unanswerable

    def to_dict(self):
        """The caller's context values, as a ``ctxt`` to pass on to another call."""
        return dict(self.values)

    def __getitem__(self, key):
        return self.values[key]

    def get(self, key, default=None):
        return self.values.get(key, default)

    def __repr__(self):
        return (
            f"Context(values={self.values!r}, user_id={self.user_id!r}, "
            f"redelivered={self.redelivered!r}, msg_id={self.msg_id!r})"
        )
