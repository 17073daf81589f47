"""Who may call an RPC method: declared beside the method, with ``@rpc.callers(...)``.

The roles (what each is given by is in scheduler.rpc.access):

* ``SCHEDULER``: a scheduler's broker user (``[roles] schedulers``);
* ``OPERATOR``: an operator's (``[roles] operators``);
* ``CLIENT``: any broker user that is not an agent's, and an agent's that is also a
  scheduler's or an operator's: API services, and schedulers and operators too;
* ``AGENT_OF_HOST``: the agent of the host the message is about (``[roles] agents``),
  that host read from the message's arguments by the declaration's ``host``;
* ``ANYONE``: any sender, a message without a user_id included (reads).

A message that names a host (``host`` gives one) speaks for that host: only the host's
agent may send it, whatever the other roles declared; one that names none is for the
other roles. A server given an access policy (RPCServer's ``access``) refuses to start
while any public method of its endpoints declares no callers.
"""

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

SCHEDULER = "scheduler"
OPERATOR = "operator"
CLIENT = "client"
AGENT_OF_HOST = "agent of the host"
ANYONE = "anyone"
ROLES = (SCHEDULER, OPERATOR, CLIENT, AGENT_OF_HOST, ANYONE)


@dataclasses.dataclass(frozen=True)
class Callers:
    """The roles that may call a method, and how to read the host a message is about."""

    roles: frozenset[str]
    #: ``host(args) -> host or None``: the host a message with these arguments speaks for.
    host: Callable[[dict[str, Any]], Any] | None = None

    def host_of(self, args: dict[str, Any]) -> Any:
        return None if self.host is None else self.host(args)


def callers(*roles: str, host: str | Callable[[dict[str, Any]], Any] | None = None) -> Callable[[Any], Any]:
    """Declare who may call the decorated endpoint method: one or more of the roles above.

    ``host``: with AGENT_OF_HOST, the name of the argument naming the host the message
    is about, or a function of the message's arguments returning it (None: the message
    is about no host, and the other roles decide).
    """
    unknown = [role for role in roles if role not in ROLES]
    if not roles or unknown:
        raise ValueError(f"callers: give one or more of {', '.join(ROLES)}; got {', '.join(map(str, roles))}")
    if (host is None) == (AGENT_OF_HOST in roles):
        raise ValueError("callers: AGENT_OF_HOST needs host= (the argument naming the host), and only it")
    if isinstance(host, str):
        name = host

        def host_of(args: dict[str, Any]) -> Any:
            return args.get(name)
    else:
        host_of = host  # type: ignore[assignment]
    declared = Callers(frozenset(roles), host_of)

    def mark(func: Any) -> Any:
        func.berth_callers = declared
        return func

    return mark


def declared(func: Any) -> Callers | None:
    """The callers ``func`` declares, or None."""
    found = getattr(func, "berth_callers", None)
    return found if isinstance(found, Callers) else None


def public_methods(endpoints: Iterable[Any]) -> list[tuple[str, Any]]:
    """[(name, bound method)] of what a Dispatcher may run: the public callables of the
    endpoints, first match wins, as the Dispatcher looks them up."""
    found: dict[str, Any] = {}
    for endpoint in endpoints:
        for name in dir(endpoint):
            if name.startswith("_") or name in found:
                continue
            value = getattr(endpoint, name, None)
            if callable(value):
                found[name] = value
    return sorted(found.items())


def undeclared(endpoints: Iterable[Any]) -> list[str]:
    """``Class.method`` of each public method of ``endpoints`` that declares no callers."""
    return [f"{type(getattr(func, '__self__', func)).__name__}.{name}"
            for name, func in public_methods(endpoints) if declared(func) is None]
