"""Command-line start-up shared by every Berth command: parse, validate, log."""

import contextlib
import io
import logging
import logging.handlers
import re
import sys

from oslo_config import cfg
from oslo_log import log

from berth_contract import amqp_names as names
from berth_contract import host_names
from scheduler import conf as berth_conf
from scheduler.process import unknown_config
from scheduler.version import version

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


def check_host(conf):
    """Fail start-up on a [DEFAULT] host that cannot name this service's queues."""
    why = host_names.problem(conf.host)
    if why is not None:
        raise ValueError(f"[DEFAULT] host: {names.printable(conf.host)[:60]!r} {why}")


def _check_transport_url(conf):
    from scheduler.rpc import transport

    try:
        transport.check_url(conf.transport_url)
    except ValueError as exc:  # names transport_url, the URL in it masked
        raise ValueError(str(exc)) from None


#: Python's words for a number it cannot read, as a configuration's reader would say it.
_PYTHON_SAYS = (
    (re.compile(r"^invalid literal for int\(\) with base 10: (.*)$"), "not an integer: {}"),
    (re.compile(r"^could not convert string to float: (.*)$"), "not a number: {}"),
)


def _plainly(why):
    for pattern, plain in _PYTHON_SAYS:
        found = pattern.match(why)
        if found:
            return plain.format(found.group(1))
    return why


class _BadOption(Exception):
    def __init__(self, where, exc):
        super().__init__(where)
        self.where = where
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        # oslo.config says "Value for option X from LocationInfo(...) is not valid: why"
        source = re.search(r"detail='([^']*)'", text)
        why = _plainly(text.split(" is not valid: ", 1)[-1])
        self.reason = f"{why} (in {source.group(1)})" if source else why


#: How oslo.config refuses a command-line option's value: on standard error, then SystemExit(1),
#: without the program's name or the type's reason.
_CLI_REFUSAL = re.compile(r"^argument --(?P<dest>[^:]+): Invalid .* value: (?P<value>.*)$")


def _parse(conf, argv, prog, cli_opts):
    """``conf(argv)``, with a command-line value oslo.config refuses said as a configuration
    file's is: ``prog: invalid configuration: --name: reason (given value)``."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            conf(argv, project="berth", prog=prog, version=version())
    except SystemExit:
        lines = said.getvalue().splitlines()
        refused = _CLI_REFUSAL.match(lines[-1]) if lines else None
        opt = {opt.dest: opt for opt in cli_opts}.get(refused["dest"]) if refused else None
        if refused is None or opt is None:  # argparse's usage errors, --help, --version
            sys.stderr.write(said.getvalue())
            raise
        value = refused["value"]
        try:
            opt.type(value)
            reason = lines[-1]
        except ValueError as exc:
            reason = _plainly(str(exc))
        if value not in reason:
            reason = f"{reason} (given {value!r})"
        raise _BadOption(f"--{opt.name}", ValueError(reason)) from None
    sys.stderr.write(said.getvalue())


#: What the files loaded last hold that no Berth program reads, said once logging is set up.
_UNKNOWN = []


def _refuse_unknown(conf):
    """Under [DEFAULT] strict_config, refuse the names of _UNKNOWN."""
    if _UNKNOWN and conf.strict_config:
        more = f" (and {len(_UNKNOWN) - 1} more)" if len(_UNKNOWN) > 1 else ""
        first = _UNKNOWN[0].said(ignored=False)
        _UNKNOWN.clear()
        raise ValueError(f"{first}{more}; [DEFAULT] strict_config refuses names Berth does not know")


def _say_unknown(say):
    for unknown in _UNKNOWN:
        say(unknown.said())
    _UNKNOWN.clear()


def _exit(prog, message):
    """Stop with ``message``, after the unknown names of the files, which may be why."""
    _say_unknown(lambda said: print(f"{prog}: warning: {said}", file=sys.stderr))
    sys.exit(message)


def load(argv, prog, register=(), validators=(), cli_opts=(), conf=None, areas=berth_conf.AREAS):
    """Parse ``argv`` into a ConfigOpts with Berth's options, or exit with one line.

    ``areas`` are the modules whose options are registered (scheduler.conf.AREAS: every
    service's; the agent's AGENT_AREAS), ``register`` extra ``register_opts(conf)``
    callables (the agent's, the plugins'), ``validators`` callables ``f(conf)`` that raise
    ``ValueError("[group] option: reason")`` for values no type can check,
    ``cli_opts`` command-line-only options.
    """
    conf = conf if conf is not None else cfg.ConfigOpts()
    berth_conf.register_opts(conf, areas)
    if cli_opts:
        conf.register_cli_opts(cli_opts)
    _UNKNOWN.clear()
    try:
        for register_opts in register:  # the plugins' may fail: two of one name, say
            register_opts(conf)
        _parse(conf, argv, prog, cli_opts)
        # berth's own areas are few, to start quickly: it judges the names near those it reads
        _UNKNOWN[:] = unknown_config.find(conf, own_only=areas == berth_conf.CLI_AREAS)
        _check_every_value(conf)
        _refuse_unknown(conf)  # before the checks a misspelt name may make fail
        _check_transport_url(conf)
        for validate in validators:
            validate(conf)
    except _BadOption as exc:
        _exit(prog, f"{prog}: invalid configuration: {exc.where}: {exc.reason}")
    except ValueError as exc:
        _exit(prog, f"{prog}: invalid configuration: {exc}")
    except (cfg.ConfigFilesNotFoundError, cfg.ConfigDirNotFoundError) as exc:
        _exit(prog, f"{prog}: {exc}")
    except cfg.Error as exc:
        _exit(prog, f"{prog}: invalid configuration: {str(exc).splitlines()[0]}")
    return conf


#: Loggers kept at WARNING unless [DEFAULT] default_log_levels names them (oslo.log's list does not).
QUIET_LOGGERS = ("kombu", "alembic")


def log_destination(conf):
    """Whether the options name where logs go, other than standard error."""
    return bool(conf.log_config_append or conf.log_file or conf.log_dir or conf.use_journal
                or conf.use_syslog)


#: What oslo.log raises for a destination it cannot open: a log file's directory, the journal's
#: Python bindings (use_journal), an unknown syslog_log_facility, a log_config_append file.
_CANNOT_LOG = (OSError, RuntimeError, TypeError, ValueError, log.LogConfigError)


def setup_logging(conf, prog):
    """Log as oslo.log's options say: log_file or log_dir (``<log_dir>/<prog>.log``), use_journal,
    use_syslog, use_json, debug, the format strings. With none of the destinations, to standard
    error: a service's standard output is for what it prints (``berth-manage db version``, the
    all-in-one demo), never for its log. A destination that cannot be opened stops the start
    with one line."""
    try:
        _setup(conf, prog)
    except _CANNOT_LOG as exc:
        sys.exit(f"{prog}: cannot log as configured: {exc}")
    elsewhere = log_destination(conf)  # a log file or the journal: its operator's terminal hears it too

    def say(said):
        LOG.warning("%s", said)
        if elsewhere:
            print(f"{prog}: warning: {said}", file=sys.stderr)

    _say_unknown(say)


def _setup(conf, prog):
    if not (log_destination(conf) or conf.use_stderr):
        conf.set_override("use_stderr", True)
    if conf.log_dir and not conf.log_file:
        conf.set_override("log_file", f"{prog}.log")
    log.setup(conf, prog, version=version())
    conf.oslo_log_fast_paths  # noqa: B018 (read so that oslo.config warns of it when a file sets it)
    named = {pair.partition("=")[0] for pair in conf.default_log_levels}
    for noisy in QUIET_LOGGERS:
        if noisy not in named:
            logging.getLogger(noisy).setLevel(logging.WARNING)


def setup_command_logging(conf, prog):
    """The log of ``berth``, whose standard error is its user's: only where log_file, log_dir,
    use_journal, use_syslog or use_stderr send it (``berth --log-file PATH ...``), at DEBUG with
    debug; without any, only warnings and errors reach standard error, as bare lines. A
    destination that cannot be opened is said in one line, and the command goes on."""
    _say_unknown(lambda said: print(f"{prog}: warning: {said}", file=sys.stderr))
    if not (log_destination(conf) or conf.use_stderr):
        return
    excepthook = sys.excepthook
    try:
        _setup(conf, prog)
    except _CANNOT_LOG as exc:
        logging.getLogger().handlers[:] = [logging.StreamHandler()]
        print(f"{prog}: cannot log as configured ({exc}); logging warnings to standard error only",
              file=sys.stderr)
    finally:
        sys.excepthook = excepthook  # a command's crash is for its user to see


def reopen_logs():
    """Open the log file again if it was moved or removed (what SIGHUP asks of a daemon)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.handlers.WatchedFileHandler):
            handler.reopenIfNeeded()
