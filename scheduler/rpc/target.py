"""Where a message goes: a topic, optionally one server of it, or all of them."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    topic: str
    server: str | None = None
    fanout: bool = False

    def __post_init__(self):
        if not self.topic or not isinstance(self.topic, str):
            raise ValueError(f"Target topic must be a non-empty string, not {self.topic!r}")
