"""oslo.log's log lines, formatted at a fraction of the cost for the common record.

oslo.log's ContextFormatter builds, for every record, the request's values twice, a
timezone object for an ISO time the default formats never print and a format style
object. A scheduler writes one INFO line per placement, so that cost is paid thousands
of times a second. :class:`LineFormatter` writes the same line, character for character,
doing each of those things once or only when the format strings ask for it; a record it
has no shortcut for (an exception or stack to print, WARNING and above with their error
summary, DEBUG with its suffix, an instance to name) is formatted by ContextFormatter
itself.

LineFormatter copies what ContextFormatter does, so it was checked against the oslo.log
series TESTED_OSLO_LOG (setup.cfg requires its lower bound only).
``[DEFAULT] oslo_log_fast_paths = false`` leaves
oslo.log's formatter in place, and so does an oslo.log outside that range, with a warning.
"""

import datetime
import importlib.metadata
import logging

from dateutil import tz
from oslo_config import cfg
from oslo_context import context as oslo_context
from oslo_log import formatters

from scheduler.utils import pins

LOG = logging.getLogger(__name__)

opts = [
    cfg.BoolOpt(
        "oslo_log_fast_paths",
        default=True,
        help="Write the services' plain INFO log lines (one per placement) with Berth's "
        "own formatter instead of oslo.log's ContextFormatter: the same line, character "
        "for character, for about two thirds of the CPU. Records it has no shortcut for "
        "(other levels, exceptions, instances) still go to ContextFormatter. It copies "
        "what ContextFormatter does and is checked against oslo.log 8.3, and taken only "
        "with it. Turned off, every line is ContextFormatter's. Turn it off if "
        "lines look wrong with an oslo.log newer than that range; Berth also falls back "
        "by itself, with a warning at start-up, when the installed oslo.log is outside "
        "the range. A log_config_append file's formatters are never replaced.",
    ),
]

TESTED_OSLO_LOG = ">=8.3,<8.4"  # checked against; setup.cfg requires the lower bound only

#: The values ContextFormatter gives a record that has none of its own.
_DEFAULTS = ("color", "user_identity", "resource", "user_name", "project_name", "global_request_id")
#: Attributes of a request that ContextFormatter prints as the instance.
_INSTANCE_ATTRIBUTES = ("instance", "instance_uuid", "resource_uuid")


class _FalseAsDash(dict):
    """A request's values where an unset one reads '-', as oslo.log prints the user identity."""

    def __getitem__(self, key):
        return self.get(key) or "-"


class LineFormatter(formatters.ContextFormatter):
    """ContextFormatter's lines, cheaper for an INFO record without exception or instance."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._zone = tz.tzlocal()  # ContextFormatter makes one per record

    def format(self, record):
        fields = record.__dict__
        context = fields.get("context", oslo_context.get_current())
        if (record.levelno != logging.INFO or record.exc_info or record.exc_text or record.stack_info
                or fields.get("instance") or fields.get("instance_uuid")
                or not isinstance(context, oslo_context.RequestContext | None)
                or any(getattr(context, name, None) for name in _INSTANCE_ATTRIBUTES)):
            return super().format(record)
        conf = self.conf
        record.project = self.project
        record.version = self.version
        values = None
        if context:
            values = context.get_logging_values()
            fields.update(values)
        record.instance = ""
        for key in _DEFAULTS:
            if key not in fields:
                fields[key] = ""
        if values is not None:
            record.user_identity = conf.logging_user_identity_format % _FalseAsDash(values)
        if fields.get("request_id"):
            fmt = conf.logging_context_format_string
        else:
            fmt = conf.logging_default_format_string
        record.error_summary = "-" if "%(error_summary)s" in fmt else ""
        if "%(isotime)" in fmt:
            record.isotime = self._iso_time(record.created)
        try:
            record.message = record.getMessage()
            if "%(asctime)" in fmt:
                record.asctime = self.formatTime(record, self.datefmt)
            return fmt % fields
        except (TypeError, KeyError, ValueError):
            # ContextFormatter says what went wrong, in its own words.
            return super().format(record)

    def _iso_time(self, created):
        isotime = datetime.datetime.fromtimestamp(created).replace(tzinfo=self._zone).isoformat()
        if created == int(created):
            # isoformat() leaves out zero microseconds; ContextFormatter puts them back.
            isotime = f"{isotime[:-6]}.000000{isotime[-6:]}"
        return isotime


def list_opts() -> list:
    return [(None, opts)]


def problem(version: str | None = None) -> str:
    """Why LineFormatter cannot stand in for oslo.log ``version``'s ContextFormatter (default:
    the one installed), "" if it can."""
    if version is None:
        try:
            version = importlib.metadata.version("oslo.log")
        except importlib.metadata.PackageNotFoundError:
            return "oslo.log's version is unknown"
    if not pins.admits(TESTED_OSLO_LOG, version):
        return f"oslo.log {version} is outside the range Berth's log lines were checked against"
    return ""


def install(conf, project, version):
    """Give every handler oslo.log's setup gave a ContextFormatter a LineFormatter instead
    (none when a log_config_append file chose the formatters, when ``[DEFAULT]
    oslo_log_fast_paths`` is off, or when the installed oslo.log is outside the pin)."""
    if conf.log_config_append or not conf.oslo_log_fast_paths:
        return
    why = problem()
    if why:
        LOG.warning("Not using Berth's log line formatter ([DEFAULT] oslo_log_fast_paths): %s; "
                    "oslo.log's ContextFormatter writes every line, for more CPU. Set "
                    "oslo_log_fast_paths = false to say so, or install oslo.log%s.",
                    why, TESTED_OSLO_LOG)
        return
    for handler in logging.getLogger().handlers:
        if type(handler.formatter) is formatters.ContextFormatter:
            handler.setFormatter(LineFormatter(project=project, version=version,
                                               datefmt=conf.log_date_format, config=conf))
