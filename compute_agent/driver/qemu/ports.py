"""A free TCP port of [qemu] migration_port_min..max for a move coming in (live or cold)."""

import errno
import socket


class NoFreePort(Exception):
    pass


def free_port(address, low, high, taken=()):
    """The first port of ``low``..``high`` on ``address`` that nothing listens on and that is not in
    ``taken`` (the ports of migrations prepared but not begun, whose qemu may not listen yet)."""
    for port in range(low, high + 1):
        if port in taken:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((address, port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    continue
                raise NoFreePort(f"cannot listen on {address}:{port}: {exc}") from None
            return port
    raise NoFreePort(f"no free port on {address} among {low}-{high} ([qemu] migration_port_min and "
                     "migration_port_max): too many moves coming in at once")
