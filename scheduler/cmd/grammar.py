"""The words of every ``berth`` command: OpenStack's noun-verb grammar (``berth server create``,
``berth flavor list``, ``berth host drain``), and the verbs of earlier releases kept as aliases
(``berth boot`` is ``berth server create``).

The command modules declare their parsers under the words they were written with (``boot``,
``server-group``); ``ROUTES`` says where each goes in the grammar, so that the parser of one
command is built, and its module imported, only when that command is asked for.
"""

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class Route:
    """The parsers ``module.adder(subparsers)`` declares as ``built`` (a command, or a group and
    every action in it) go under ``words`` in the grammar."""

    words: tuple[str, ...]
    module: str
    adder: str
    built: tuple[str, ...]


def _route(words, module, adder, built=None):
    words = tuple(words.split())
    return Route(words, f"scheduler.cmd.{module}", adder, tuple(built.split()) if built else words)


#: Groups, in the order ``berth help`` lists them, each with the line it says of them.
GROUPS = {
    ("server",): "Instances: create, list, show, delete, power, resize and migrate them.",
    ("server", "migration"): "Moves of instances.",
    ("server", "group"): "Server groups: affinity and anti-affinity.",
    ("server", "metric"): "Application metrics pushed for instances (scaling groups read them).",
    ("console",): "Instances' serial consoles.",
    ("console", "log"): "The last lines of an instance's serial console.",
    ("flavor",): "Flavors: sizes, resource classes, traits and extra specs.",
    ("host",): "Compute hosts: usage, service, evacuation and drains.",
    ("service",): "The schedulers and compute agents Berth knows.",
    ("aggregate",): "Host aggregates: hosts, metadata, zones.",
    ("rebalance",): "Plans of migrations that make room or rebalance the fleet.",
    ("scaling", "group"): "Autoscaling groups: create, list, show, set, pause, resume, delete, what-if.",
    ("scaling",): "Autoscaling.",
    ("fake-load",): "The load the fake driver's instances report (tests and demonstrations).",
}

ROUTES = (
    _route("server create", "instance_commands", "add_boot_and_delete", "boot"),
    _route("server delete", "instance_commands", "add_boot_and_delete", "delete"),
    _route("server list", "instance_commands", "add_listings", "instances"),
    _route("server show", "instance_commands", "add_listings", "show"),
    _route("server stop", "power_commands", "add_commands", "stop"),
    _route("server start", "power_commands", "add_commands", "start"),
    _route("server reboot", "power_commands", "add_commands", "reboot"),
    _route("server resize", "move_commands", "add_commands", "resize"),
    _route("server migrate", "move_commands", "add_commands", "migrate"),
    _route("server migration list", "move_commands", "add_commands", "migrations"),
    _route("server group", "admin_commands", "add_commands", "server-group"),
    _route("server metric", "instance_metric_commands", "add_commands", "instance-metric"),
    _route("console log show", "power_commands", "add_commands", "console-log"),
    _route("flavor", "flavor_commands", "add_commands"),
    _route("host list", "host_commands", "add_usage", "hosts"),
    _route("host", "host_commands", "add_commands"),
    _route("service", "host_commands", "add_commands"),
    _route("aggregate", "admin_commands", "add_commands"),
    _route("rebalance", "rebalance_commands", "add_commands"),
    _route("scaling group", "scaling_commands", "add_commands", "scaling-group"),
    _route("fake-load", "fake_load_commands", "add_commands"),
    _route("simulate", "simulate_command", "add_commands"),
)

#: Earlier releases' words for a command or a group: ``boot`` -> ``server create``.
ALIASES = {route.built: route.words for route in ROUTES if route.built != route.words}

HELP = "help"


def canonical(words: list[str]) -> list[str]:
    """``words`` (a command line from its command on) with an alias at its start said in the
    grammar's words: ``["boot", "--flavor", "m1"]`` -> ``["server", "create", "--flavor", "m1"]``."""
    for alias in sorted(ALIASES, key=len, reverse=True):
        if tuple(words[:len(alias)]) == alias:
            return list(ALIASES[alias]) + words[len(alias):]
    return list(words)


def route_of(words: list[str]) -> Route | None:
    """The route whose words start ``words`` (in the grammar's words), or None."""
    found = [route for route in ROUTES if tuple(words[:len(route.words)]) == route.words]
    return max(found, key=lambda route: len(route.words)) if found else None


def group_of(words: list[str]) -> tuple[str, ...] | None:
    """The longest group ``words`` starts with, or None."""
    found = [group for group in GROUPS if tuple(words[:len(group)]) == group]
    return max(found, key=len) if found else None


def routes_under(prefix: tuple[str, ...]) -> list[Route]:
    return [route for route in ROUTES if route.words[:len(prefix)] == prefix]


def next_words(prefix: tuple[str, ...]) -> list[str]:
    """The words that may follow ``prefix`` in the grammar (routes and groups: a group's own
    actions are in its module)."""
    paths = [route.words for route in ROUTES] + list(GROUPS)
    found = [path[len(prefix)] for path in paths if len(path) > len(prefix) and path[:len(prefix)] == prefix]
    if not prefix:
        found += [alias[0] for alias in ALIASES] + [HELP]
    return list(dict.fromkeys(found))


def close(word: str, known: list[str]) -> list[str]:
    """The known words nearest ``word``, nearest first."""
    return difflib.get_close_matches(word, known, n=3, cutoff=0.7)


def unknown(words: list[str]) -> str:
    """Why ``words`` name no command, with the nearest the grammar knows."""
    prefix = group_of(words) or ()
    given = words[len(prefix)] if len(words) > len(prefix) else ""
    said = " ".join(prefix + (given,)).strip()
    near = close(given, next_words(prefix))
    if near:
        guesses = " or ".join(repr(" ".join(prefix + (word,))) for word in near)
        return f"{said!r} is not a command: did you mean {guesses}? (berth help lists them)"
    return f"{said!r} is not a command (berth help lists them)"
