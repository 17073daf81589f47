import os
import socket

from oslo_config import cfg


def _default_state_path():
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
        sample_default="$XDG_STATE_HOME/berth",
        help="Directory for the embedded database, the filesystem transport's queues "
        "and the compute agents' instance records.",
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
    cfg.BoolOpt("debug", default=False, help="Log at DEBUG instead of INFO."),
    cfg.StrOpt("log_file", help="Log to this file instead of standard error."),
]


def register_opts(conf):
    conf.register_opts(opts)


def list_opts():
    return [(None, opts)]
