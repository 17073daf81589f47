"""Where a message goes: a topic, optionally one server of it, or all of them; and the
version of its API it needs (None: 1.0, as oslo.messaging reads a message without one)."""

from dataclasses import dataclass

from berth_contract import versions


@dataclass(frozen=True)
class Target:
    topic: str
    server: str | None = None
    fanout: bool = False
    version: str | None = None

    def __post_init__(self):
        if not self.topic or not isinstance(self.topic, str):
            raise ValueError(f"Target topic must be a non-empty string, not {self.topic!r}")
        if self.version is not None:
            versions.parse(self.version)
