"""Command-line start-up shared by every Berth command: parse, validate, log."""

import importlib.metadata
import logging
import logging.handlers
import re
import sys

from oslo_config import cfg

from scheduler import conf as berth_conf

LOG = logging.getLogger(__name__)


def _check_every_value(conf):
    """Read every registered option once so that a bad value fails now, not mid-run."""
    for name in list(conf):
        try:
            value = getattr(conf, name)
        except (cfg.ConfigFileValueError, ValueError) as exc:
            raise _BadOption(f"[DEFAULT] {name}", exc) from exc
        if isinstance(value, cfg.ConfigOpts.GroupAttr):
            for opt_name in list(value):
                try:
                    getattr(value, opt_name)
                except (cfg.ConfigFileValueError, ValueError) as exc:
                    raise _BadOption(f"[{name}] {opt_name}", exc) from exc


def _check_transport_url(conf):
    from scheduler.rpc import transport

    try:
        transport.check_url(conf.transport_url)
    except ValueError as exc:  # names transport_url, the URL in it masked
        raise ValueError(str(exc)) from None


class _BadOption(Exception):
    def __init__(self, where, exc):
        super().__init__(where)
        self.where = where
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        # oslo.config says "Value for option X from LocationInfo(...) is not valid: why"
        source = re.search(r"detail='([^']*)'", text)
        why = text.split(" is not valid: ", 1)[-1]
        self.reason = f"{why} (in {source.group(1)})" if source else why


def version():
    """Berth's version, as installed (``--version`` on every command prints it)."""
    try:
        return importlib.metadata.version("berth")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown (not installed)"


def load(argv, prog, register=(), validators=(), cli_opts=(), conf=None):
    """Parse ``argv`` into a ConfigOpts with Berth's options, or exit with one line.

    ``register`` are extra ``register_opts(conf)`` callables (the agent's,
    the plugins'), ``validators`` callables ``f(conf)`` that raise
    ``ValueError("[group] option: reason")`` for values no type can check,
    ``cli_opts`` command-line-only options.
    """
    conf = conf if conf is not None else cfg.ConfigOpts()
    berth_conf.register_opts(conf)
    for register_opts in register:
        register_opts(conf)
    if cli_opts:
        conf.register_cli_opts(cli_opts)
    try:
        conf(argv, project="berth", prog=prog, version=version())
        _check_every_value(conf)
        _check_transport_url(conf)
        for validate in validators:
            validate(conf)
    except _BadOption as exc:
        sys.exit(f"{prog}: invalid configuration: {exc.where}: {exc.reason}")
    except ValueError as exc:
        sys.exit(f"{prog}: invalid configuration: {exc}")
    except (cfg.ConfigFilesNotFoundError, cfg.ConfigDirNotFoundError) as exc:
        sys.exit(f"{prog}: {exc}")
    except cfg.Error as exc:
        sys.exit(f"{prog}: invalid configuration: {str(exc).splitlines()[0]}")
    return conf


def setup_logging(conf, prog):
    # A watched file is opened again when logrotate moves it away.
    handler = logging.handlers.WatchedFileHandler(conf.log_file) if conf.log_file else logging.StreamHandler()
    handler.setFormatter(
        logging.Formatter(f"%(asctime)s %(process)d %(levelname)s {prog} %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if conf.debug else logging.INFO)
    for noisy in ("amqp", "kombu", "alembic", "sqlalchemy"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def reopen_logs():
    """Open the log file again if it was moved or removed (what SIGHUP asks of a daemon)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.handlers.WatchedFileHandler):
            handler.reopenIfNeeded()
