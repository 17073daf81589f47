"""A Berth RPC server in its own process, for the cross-process tests.

Usage: python -m tests.unit.rpc.child_server URL STATE_PATH EXCHANGE TOPIC SERVER
Prints "ready" once consuming; stops cleanly when its stdin closes.
"""

import os
import sys
import time

from scheduler import conf as berth_conf
from scheduler import rpc


def say(line):
    """One write per line: print() writes the line and its end apart, so that the consuming
    thread's line could land between "ready" and its newline."""
    sys.stdout.write(f"{line}\n")
    sys.stdout.flush()


class Endpoint:
    def echo(self, context, **kwargs):
        return {"pid": os.getpid(), "args": kwargs, "context": context.values}

    def record(self, context, **kwargs):
        say(f"cast {kwargs}")

    def block(self, context, **kwargs):
        say(f"blocking {kwargs}")
        while True:
            time.sleep(1)


def main(url, state_path, exchange, topic, server):
    conf = berth_conf.new_conf()
    conf([])
    conf.set_override("state_path", state_path)
    conf.set_override("control_exchange", exchange)
    conf.set_override("polling_interval", 0.01, group="oslo_messaging_rabbit")
    transport = rpc.get_transport(conf, url)
    rpc_server = rpc.get_rpc_server(transport, rpc.Target(topic=topic, server=server), [Endpoint()])
    rpc_server.start()
    say("ready")
    # os.read, not sys.stdin.read: eventlet makes it green, so the server runs meanwhile.
    while os.read(0, 1024):
        pass
    rpc_server.stop()
    rpc_server.wait()
    transport.cleanup()
    say("stopped")


if __name__ == "__main__":
    main(*sys.argv[1:6])
