"""Who may speak for a compute host: the broker user registered for it.

RabbitMQ refuses a message whose AMQP ``user_id`` property differs from the
user of the connection that publishes it, so ``context.user_id`` says which
broker user sent a message. A report, an instance update or a reschedule
about a host is accepted only from the user ``[scheduler] agent_users`` maps
that host to; a host not in the map is accepted unless ``[scheduler]
require_agent_auth`` is set.
"""

from scheduler.exception import NotAuthorized


class AgentAuth:
    def __init__(self, conf):
        self._conf = conf

    def check(self, context, host, what):
        """Raise NotAuthorized unless ``context``'s broker user may speak for ``host``."""
        opts = self._conf.scheduler
        user = getattr(context, "user_id", None)
        expected = (opts.agent_users or {}).get(host)
        if expected is None:
            if not opts.require_agent_auth:
                return
            raise NotAuthorized(
                f"{what} about host {host!r} rejected: the host has no broker user in "
                f"[scheduler] agent_users (sent by broker user {user!r})",
                host=host,
                user=user,
            )
        if user != expected:
            raise NotAuthorized(
                f"{what} about host {host!r} rejected: sent by broker user {user!r}, "
                f"but the host's agent is {expected!r}",
                host=host,
                user=user,
            )
