"""Who is who on the broker (``[roles]``), and the check a server makes of each message.

RabbitMQ refuses a message whose AMQP ``user_id`` property differs from the user of the
connection that publishes it, so ``context.user_id`` says which broker user sent a
message (None: it carries no user_id, and any user may have sent it). A user's role is
what the ``[roles]`` lists say; any other user is a client. Every Berth daemon loads the
same options: the schedulers check what they are sent, the agents check that their work
comes from a scheduler.

With ``[roles] enforce`` off (the default: the embedded setup has no broker users) only
the messages about a host are checked, as before there were roles: against ``agents``,
and a host missing from it is accepted unless ``require_agent_auth``.
"""

import logging
from typing import Any

from oslo_config import cfg

from scheduler.exception import NotAuthorized
from scheduler.rpc.roles import AGENT_OF_HOST, ANYONE, CLIENT, OPERATOR, SCHEDULER, Callers
from scheduler.rpc.transport import RABBIT_SCHEMES

LOG = logging.getLogger(__name__)

group = cfg.OptGroup(
    "roles",
    title="Who may speak",
    help="The broker users of the schedulers, the operators and each host's agent. Every RPC method "
    "declares who may call it; with enforce on, a message's AMQP user_id (which RabbitMQ checks "
    "against the publishing connection's user) decides. Any user in none of the lists is a client. "
    "Every Berth daemon reads these: give them all the same values.",
)

opts = [
    cfg.ListOpt(
        "schedulers",
        default=[],
        help="Broker users of the schedulers. Only they may tell the schedulers that hosts or "
        "aggregates changed (hosts_changed, aggregates_changed), and with enforce on an agent "
        "accepts builds and terminates (run_instance, terminate_instance) from them only.",
    ),
    cfg.ListOpt(
        "operators",
        default=[],
        help="Broker users of the operators: host enable, disable and delete, aggregates, the fake "
        "driver's load (berth fake-load).",
    ),
    cfg.DictOpt(
        "agents",
        default={},
        help="Broker user of each compute host's agent, host:user pairs (e.g. "
        "compute1:agent-compute1,compute2:agent-compute2). A report_resources or instance_update "
        "about a host listed here, or a reschedule sent back by it, is accepted only from that "
        "user; anything else is refused (a call's failure, or a dead letter). An agent's user "
        "is no client: it may not boot, delete or change anything else. Only rabbit:// "
        "validates user_id: on filesystem:// and memory:// it is whatever the publisher wrote.",
        deprecated_opts=[cfg.DeprecatedOpt("agent_users", group="scheduler")],
    ),
    cfg.BoolOpt(
        "require_agent_auth",
        default=False,
        help="With enforce off: also refuse reports, updates and reschedules about hosts missing "
        "from agents (enforce on refuses them always).",
        deprecated_opts=[cfg.DeprecatedOpt("require_agent_auth", group="scheduler")],
    ),
    cfg.BoolOpt(
        "enforce",
        default=False,
        help="Refuse every message from a broker user whose role may not call its method "
        "(admin guide: Who may speak), and every message without a user_id but reads. Off by "
        "default, so that the embedded setup works without broker users: then any broker user "
        "may call every method but those about a host (see agents), and a daemon on rabbit:// "
        "says so at start. Needs rabbit://, the only transport that validates user_id.",
    ),
]


def list_opts():
    return [(group, opts)]


def check_options(conf):
    """Fail start-up on roles that cannot be enforced as configured."""
    roles = conf.roles
    scheme = conf.transport_url.split("://", 1)[0].lower()
    if roles.enforce and scheme not in RABBIT_SCHEMES:
        raise ValueError(f"[roles] enforce: only rabbit:// validates the user_id of messages; on {scheme}:// "
                         "every message would be refused: turn enforce off, or use RabbitMQ")
    for host, user in (roles.agents or {}).items():
        if not host or not user:
            raise ValueError(f"[roles] agents: give host:user pairs, got {host!r}:{user!r}")


class Access:
    """The roles of the broker users, and whether a message's sender may call its method."""

    def __init__(self, schedulers=(), operators=(), agents=None, enforce=False, require_agent_auth=False):
        self.schedulers = frozenset(schedulers)
        self.operators = frozenset(operators)
        self.agents = dict(agents or {})
        self.hosts_of = {}
        for host, user in self.agents.items():
            self.hosts_of.setdefault(user, []).append(host)
        self.enforce = enforce
        self.require_agent_auth = require_agent_auth

    @classmethod
    def from_conf(cls, conf):
        roles = conf.roles
        return cls(roles.schedulers, roles.operators, roles.agents, roles.enforce, roles.require_agent_auth)

    def is_client(self, user):
        return user is not None and (user not in self.hosts_of or user in self.schedulers
                                     or user in self.operators)

    def describe(self, user):
        """What ``user`` is, for a refusal: 'broker user 'x' (the agent of host h)'."""
        if user is None:
            return "a message without a user_id (its broker user is unknown)"
        roles = []
        if user in self.schedulers:
            roles.append("a scheduler")
        if user in self.operators:
            roles.append("an operator")
        if user in self.hosts_of:
            hosts = sorted(self.hosts_of[user])
            roles.append(f"the agent of host{'s' if len(hosts) > 1 else ''} {', '.join(hosts[:5])}")
        return f"broker user {user!r} ({' and '.join(roles) or 'a client'})"

    def check(self, user, method, callers: Callers, args: dict[str, Any]) -> None:
        """Raise NotAuthorized unless ``user`` (a message's user_id) may call ``method``
        with ``args``."""
        host = callers.host_of(args) if AGENT_OF_HOST in callers.roles else None
        if host is not None:
            self._check_agent(user, method, host)
            return
        if not self.enforce or ANYONE in callers.roles:
            return
        roles = callers.roles
        if user is not None and (
            (CLIENT in roles and self.is_client(user))
            or (SCHEDULER in roles and user in self.schedulers)
            or (OPERATOR in roles and user in self.operators)
        ):
            return
        raise NotAuthorized(f"{method} refused: sent by {self.describe(user)}; {method} may be called by "
                            f"{_needed(roles)}", method=method, user=user, role=_needed(roles))

    def _check_agent(self, user, method, host):
        expected = self.agents.get(host) if isinstance(host, str) else None
        if expected is None:
            if not (self.enforce or self.require_agent_auth):
                return
            raise NotAuthorized(
                f"{method} about host {str(host)[:200]!r} refused: the host has no broker user in "
                f"[roles] agents (sent by {self.describe(user)})", method=method, user=user,
                role=AGENT_OF_HOST)
        if user != expected:
            raise NotAuthorized(
                f"{method} about host {host!r} refused: sent by {self.describe(user)}, but only the "
                f"host's agent, broker user {expected!r}, may send it", method=method, user=user,
                role=AGENT_OF_HOST)

    def warn_if_open(self, transport, topic):
        """Say once per process, on rabbit://, that roles are not enforced."""
        if self.enforce or not transport.is_rabbit or _warned:
            return
        _warned.append(topic)
        LOG.warning("[roles] enforce is off: any user of the broker at %s may call every method of %s (%s) "
                    "but those about a host ([roles] agents). List the schedulers', operators' and agents' "
                    "broker users in [roles] and set [roles] enforce = true (admin guide: Who may speak)",
                    transport.safe_url, topic, _OPEN.get(topic, "all it serves"))


#: The topics already warned about: once per process.
_warned: list[str] = []
#: What anyone may then do, by topic.
_OPEN = {"scheduler": "boot, delete, disable and delete hosts, tell the schedulers the hosts changed...",
         "compute": "build and terminate instances on the agents..."}

_NEEDED = {
    SCHEDULER: "schedulers ([roles] schedulers)",
    OPERATOR: "operators ([roles] operators)",
    CLIENT: "clients (any broker user but an agent's)",
    AGENT_OF_HOST: "the agent of the host it is about ([roles] agents)",
}


def _needed(roles):
    order = (CLIENT, SCHEDULER, OPERATOR, AGENT_OF_HOST)
    return " or ".join(_NEEDED[role] for role in order if role in roles)
