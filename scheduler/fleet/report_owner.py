"""Which scheduler writes a host's reports to the database.

Every scheduler takes every report into its host table; one writes it: the owner of the
host among the live schedulers, by rendezvous (highest random weight) hashing of the pair
(host, scheduler). A scheduler joining or leaving moves only the hosts it gains or had.
"""

import datetime
import hashlib
from collections.abc import Iterable, Mapping


def weight(host: str, scheduler: str) -> int:
    """The pair's weight: the same in every process and on every machine."""
    digest = hashlib.blake2b(f"{host}\0{scheduler}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(host: str, schedulers: Iterable[str]) -> str:
    """The scheduler of ``schedulers`` that writes ``host``'s reports."""
    best = max(schedulers, key=lambda s: (weight(host, s), s), default=None)
    if best is None:
        raise ValueError(f"no scheduler to own host {host!r}: schedulers is empty")
    return best


def live_schedulers(heartbeats: Mapping[str, datetime.datetime | None], now: datetime.datetime,
                    down_time: float, me: str) -> frozenset[str]:
    """The schedulers whose last heartbeat (``{name: last seen}``, by the clock of ``now``) is at
    most ``down_time`` seconds old, and ``me``, live while it asks."""
    limit = datetime.timedelta(seconds=down_time)
    return frozenset(name for name, seen in heartbeats.items()
                     if seen is not None and now - seen <= limit) | {me}


class ReportOwners:
    """The hosts ``me`` writes, among the live schedulers it was last told of (itself alone
    until then); each host's owner kept until the live schedulers change."""

    def __init__(self, me: str):
        self.me = me
        self.live: frozenset[str] = frozenset({me})
        self._owners: dict[str, str] = {}

    def set_live(self, schedulers: Iterable[str]) -> None:
        live = frozenset(schedulers) | {self.me}
        if live != self.live:
            self.live, self._owners = live, {}

    def owns(self, host: str) -> bool:
        found = self._owners.get(host)
        if found is None:
            found = self._owners[host] = owner(host, self.live)
        return found == self.me
