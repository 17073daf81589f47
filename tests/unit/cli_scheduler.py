"""For tests that run ``berth`` commands in-process: the CLI's config file (memory://, an
exchange of its own), the CLI parsed or run from it, and a scheduler configured from the same
file serving real endpoints on SQLite."""

from __future__ import annotations

import contextlib
import io
import uuid as uuidlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from oslo_config import cfg

from berth_contract.flavors import FLAVORS
from scheduler import rpc
from scheduler.client import REPORTS_TOPIC
from scheduler.cmd import cli
from scheduler.db.api import Database
from scheduler.manager import SchedulerManager
from scheduler.process import startup as config
from scheduler.service import agents_server, assemble
from tests.unit.scheduler.service_parts import transport_and_database


def stored_flavor(name: str) -> dict[str, Any]:
    """show_flavor's answer for ``name`` from a scheduler that keeps the classic flavors only."""
    if name not in FLAVORS:
        raise rpc.RemoteError("InvalidRequest", f"no flavor named {name!r}", "")
    return dict(FLAVORS[name], name=name, extra_specs={}, created_at="2026-12-03T10:00:00.000000Z",
                updated_at="2026-12-03T10:00:00.000000Z")


def write_conf(directory: Path, more: str = "") -> Path:
    """Write ``directory``/berth.conf: memory://, a fresh control exchange, a state_path in
    ``directory``, then ``more`` (further sections); returns its path."""
    path = directory / "berth.conf"
    path.write_text(
        "[DEFAULT]\ntransport_url = memory://\n"
        f"control_exchange = cli-{uuidlib.uuid4().hex[:8]}\n"
        f"state_path = {directory / 'state'}\nrpc_response_timeout = 10\n" + more
    )
    return path


def parse(conf_file: Path, *argv: str) -> Any:
    """The parsed command line ``berth --config-file CONF_FILE ARGV...`` (its ``command``)."""
    return cli.load(["--config-file", str(conf_file), *argv], conf=cfg.ConfigOpts()).command


def main(conf_file: Path, *argv: str) -> tuple[int, str]:
    """Run ``berth --config-file CONF_FILE ARGV...`` as a user would: (exit status, output)."""
    out = io.StringIO()
    status = cli.main(["--config-file", str(conf_file), *argv], out=out)
    return status, out.getvalue()


#: Builds the endpoints served beside the manager from (conf, database, manager).
Endpoints = Callable[[cfg.ConfigOpts, Database, SchedulerManager], list[object]]


@contextlib.contextmanager
def cli_scheduler(conf_file: Path, endpoints: Endpoints) -> Iterator[Database]:
    """Serve a SchedulerManager and what ``endpoints`` builds on the "scheduler" topic (server
    s1) and the agents' one, configured from ``conf_file``; yields the scheduler's database, synced."""
    conf = cfg.ConfigOpts()
    config.load(["--config-file", str(conf_file)], "berth-scheduler", conf=conf)
    transport, database = transport_and_database(conf)
    manager = assemble(conf, transport, database).manager
    served = [manager, *endpoints(conf, database, manager)]
    servers = [rpc.get_rpc_server(transport, rpc.Target(topic="scheduler", server="s1"), served),
               agents_server(transport, served, fanouts=(REPORTS_TOPIC,))]
    for server in servers:
        server.start()
    try:
        yield database
    finally:
        for server in servers:
            server.stop()
        for server in servers:
            server.wait()
        transport.cleanup()
        database.dispose()


def fields(table: str) -> dict[str, str]:
    """{field: value} of a show's table (``| field | value |`` rows; a value of several lines
    joined by newlines)."""
    found: dict[str, str] = {}
    field = None
    for line in table.splitlines():
        if not line.startswith("|"):
            continue
        name, value = (cell.strip() for cell in line.strip("|").split("|", 1))
        if name == "Field" and value == "Value":
            continue
        if name:
            field, found[name] = name, value
        elif field is not None:
            found[field] += "\n" + value
    return found
