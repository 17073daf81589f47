"""LineFormatter writes what oslo.log's ContextFormatter writes, character for character."""

import copy
import logging
import sys

import pytest
from oslo_context import context as oslo_context
from oslo_log import formatters

from scheduler import conf as berth_conf
from scheduler.rpc import context as rpc_context
from scheduler.utils import log_lines
from scheduler.utils.log_lines import LineFormatter

REQUEST = "req-0c3c8c4e-1f0a-4a47-9a6f-0123456789ab"
PLACED = ("Placed instance %s on host %s (%s considered, %d passed the filters)",
          ("6f1e7d3a-51a4-4a33-9d0c-6a4b7fb1c2d0", "sim-000042", "1,000 hosts", 997))


@pytest.fixture(autouse=True)
def thread_request():
    """The thread's current request as it was before each test (the tests make others current)."""
    with rpc_context.handling({}):
        yield


@pytest.fixture
def conf():
    conf = berth_conf.new_conf()
    conf([], project="berth", default_config_files=[])
    return conf


def _record(level=logging.INFO, msg=PLACED[0], args=PLACED[1], created=1764900000.123456, **extra):
    exc_info = extra.pop("exc_info", None)
    record = logging.getLogger("scheduler.planning.applier").makeRecord(
        "scheduler.planning.applier", level, __file__, 42, msg, args, exc_info, extra=extra)
    record.created = created
    record.msecs = (created - int(created)) * 1000
    return record


def _both(conf, record):
    """What ContextFormatter and LineFormatter write of ``record`` (each formats its own copy)."""
    made = {"project": "berth-scheduler", "version": "1.2.3", "datefmt": conf.log_date_format, "config": conf}
    return (formatters.ContextFormatter(**made).format(copy.copy(record)),
            LineFormatter(**made).format(copy.copy(record)))


def _request(**values):
    return rpc_context.Context({"request_id": REQUEST, "project_id": "p-1", **values})


class _Between(oslo_context.RequestContext):
    """What a Berth server's thread holds between requests: a request that is false."""

    def __bool__(self):
        return False


def _failed():
    try:
        raise ValueError("no host")
    except ValueError:
        return sys.exc_info()


@pytest.mark.parametrize("extra", [
    {},
    {"exc_info": "failed"},
    {"instance": {"uuid": "6f1e7d3a-51a4-4a33-9d0c-6a4b7fb1c2d0"}},
    {"instance_uuid": "6f1e7d3a-51a4-4a33-9d0c-6a4b7fb1c2d0"},
    {"context": {"request_id": REQUEST, "user": "u"}},
    # Made in the test (a RequestContext made becomes the thread's current request).
    {"context": lambda: oslo_context.RequestContext(
        request_id=REQUEST, user_id="u", project_id="p",
        global_request_id="req-5c0e1c55-8a8a-4c1b-9a7e-9e2a7c5a0b11")},
    {"context": lambda: oslo_context.RequestContext(request_id=REQUEST, resource_uuid="r-1")},
])
@pytest.mark.parametrize("level", [logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR])
def test_a_record_within_a_request_reads_as_oslo_log_writes_it(conf, extra, level):
    if extra.get("exc_info"):
        extra = {"exc_info": _failed()}
    if callable(extra.get("context")):
        extra = {"context": extra["context"]()}
    with rpc_context.handling(_request()):
        oslo, line = _both(conf, _record(level, **extra))
    assert REQUEST in oslo or "context" in extra
    assert line == oslo


@pytest.mark.parametrize("created", [1764900000.123456, 1764900000.0])
def test_a_record_between_requests_reads_as_oslo_log_writes_it(conf, created):
    _Between(request_id="-")  # made the thread's current one, as a server's is between requests
    oslo, line = _both(conf, _record(created=created))
    assert "[-]" in oslo
    assert line == oslo


@pytest.mark.parametrize("created", [1764900000.123456, 1764900000.0])
def test_the_format_strings_as_configured(conf, created):
    conf.set_override("logging_context_format_string",
                      "%(isotime)s %(asctime)s.%(msecs)03d %(levelname)s %(name)s [%(request_id)s "
                      "%(user_identity)s|%(global_request_id)s|%(instance)s|%(color)s] %(message)s "
                      "(%(error_summary)s) %(project)s %(version)s")
    conf.set_override("logging_default_format_string", "%(isotime)s %(levelname)s %(message)s")
    conf.set_override("logging_user_identity_format", "%(user)s/%(project_name)s/%(project)s")
    conf.set_override("log_date_format", "%d.%m.%Y %H:%M:%S")
    with rpc_context.handling(_request()):
        oslo, line = _both(conf, _record(created=created))
    assert line == oslo
    assert f"{REQUEST} -/-/p-1|" in line and "(-) p-1 1.2.3" in line
    oslo, line = _both(conf, _record(created=created))
    assert line == oslo


def test_a_message_that_cannot_be_formatted_fails_as_with_oslo_log(conf):
    made = {"project": "berth-scheduler", "version": "1.2.3", "datefmt": conf.log_date_format, "config": conf}
    record = _record(msg="Placed %s on %d", args=("x", "not a number"))
    with rpc_context.handling(_request()):
        with pytest.raises(TypeError) as oslo:
            formatters.ContextFormatter(**made).format(copy.copy(record))
        with pytest.raises(TypeError) as line:
            LineFormatter(**made).format(copy.copy(record))
    assert str(line.value) == str(oslo.value)


def _formatters(conf, tmp_path):
    """The formatters of the handlers the services' logging setup leaves, and the lines written."""
    from tests.unit.logs import service_log

    with service_log(conf, tmp_path / "berth-scheduler.log") as lines:
        made = [type(handler.formatter) for handler in logging.getLogger().handlers]
        with rpc_context.handling(_request()):
            logging.getLogger("scheduler.planning.applier").info(*(PLACED[0],) + PLACED[1])
        return made, lines()


def test_the_services_write_their_lines_with_line_formatter(conf, tmp_path):
    conf.set_override("oslo_log_fast_paths", True)
    made, lines = _formatters(conf, tmp_path)
    assert made == [LineFormatter]
    assert any(REQUEST in line and "sim-000042" in line for line in lines)


def test_with_oslo_log_fast_paths_off_the_lines_are_oslo_logs(conf, tmp_path):
    conf.set_override("oslo_log_fast_paths", False)
    made, lines = _formatters(conf, tmp_path)
    assert made == [formatters.ContextFormatter]
    assert any(REQUEST in line and "sim-000042" in line for line in lines)


def test_an_oslo_log_outside_the_pin_keeps_its_own_formatter_and_says_why(conf, tmp_path, monkeypatch):
    monkeypatch.setattr(log_lines.importlib.metadata, "version", lambda name: "9.0.0")
    conf.set_override("oslo_log_fast_paths", True)
    made, lines = _formatters(conf, tmp_path)
    assert made == [formatters.ContextFormatter]
    assert any("oslo.log 9.0.0 is outside the range" in line and "oslo_log_fast_paths" in line
               for line in lines)


@pytest.mark.parametrize(("version", "usable"), [("8.3.0", True), ("8.3.2", True), ("8.2.9", False),
                                                  ("8.4.0", False), ("not.a.version", False)])
def test_the_oslo_log_versions_line_formatter_stands_in_for(version, usable):
    assert (log_lines.problem(version) == "") is usable
