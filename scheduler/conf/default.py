import os
import socket

from oslo_config import cfg
from oslo_log import log

SYSTEM_STATE_PATH = "/var/lib/berth"


def _under_systemd():
    """Started by systemd's system manager. A user manager sets MANAGERPID as well, and its
    services (and the shells of a terminal run as one) keep to the user's own directory."""
    env = os.environ
    return bool(env.get("INVOCATION_ID") or env.get("NOTIFY_SOCKET")) and not env.get("MANAGERPID")


def _default_state_path():
    if _under_systemd():
        return SYSTEM_STATE_PATH
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "berth")


opts = [
    cfg.StrOpt(
        "transport_url",
        default="filesystem://",
        secret=True,
        help="Messaging transport. rabbit://user:pass@host:5672/vhost for production "
        "(several comma-separated hosts for a cluster); filesystem:// keeps the queues "
        "under state_path so that several processes on one machine work without a "
        "broker; memory:// works inside one process only.",
    ),
    cfg.StrOpt(
        "control_exchange",
        default="berth",
        help="The topic exchange every Berth service publishes to and consumes from.",
    ),
    cfg.StrOpt(
        "state_path",
        default=_default_state_path(),
        sample_default="<under systemd: /var/lib/berth, else: $XDG_STATE_HOME/berth>",
        help="Directory for the embedded database, the filesystem transport's queues "
        "and the compute agents' instance records. Default: /var/lib/berth for a service "
        "of systemd's system manager (INVOCATION_ID or NOTIFY_SOCKET set; the units in "
        "etc/systemd create it with StateDirectory=berth), else $XDG_STATE_HOME/berth, or "
        "~/.local/state/berth when XDG_STATE_HOME is not set.",
    ),
    cfg.StrOpt(
        "host",
        default=socket.gethostname(),
        sample_default="<hostname>",
        help="Name of this service's host. A compute agent's host is the name the "
        "scheduler places instances on.",
    ),
    cfg.IntOpt(
        "rpc_response_timeout",
        default=60,
        min=1,
        help="Seconds to wait for the reply to an RPC call.",
    ),
    cfg.BoolOpt(
        "oslo_log_fast_paths",
        default=True,
        deprecated_for_removal=True,
        deprecated_reason="Berth's own log line formatter is gone: oslo.log's ContextFormatter "
        "writes every line, with any oslo.log release. The option does nothing; remove it.",
        help="Did nothing since Berth's log line formatter was removed; still accepted so "
        "that configuration files setting it keep working.",
    ),
]


def register_opts(conf):
    conf.register_opts(opts)
    # debug, log_file, log_dir, use_journal, use_json... (oslo.log's, in [DEFAULT] too)
    log.register_options(conf)


def list_opts():
    return [(None, opts)]
