"""run_instance from many threads of one API service, each casting one request at a time, over
a real broker: the messages the broker took per request, and the CPU per request of this client
and of the broker (every process listening on its port: on a broker others use too, their load
counts).

Two ways, alternated round by round: the casts that come while one is being published gathered
into the next message (SchedulerClient, API 1.3), and a message each (``[upgrade_levels]
scheduler = 1.2``: the client as it was before it gathered). No scheduler runs: the messages wait
in the ``scheduler`` queue of a vhost of the run's own, counted and purged after each round.

    python -m benchmarks.threaded_casts [--threads 32] [--requests 3200] [--rounds 6]

``BERTH_CONCURRENCY=eventlet`` in the environment: green threads.
"""

import argparse
import os
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid

from benchmarks import process_cpu
from benchmarks.services import temporary_vhost
from benchmarks.summary import spread
from scheduler import concurrency, rpc
from scheduler import conf as berth_conf
from scheduler.client import TOPIC, SchedulerClient
from scheduler.rpc import topology

WAYS = {"gathered": None, "a message each": "1.2"}  # way: its [upgrade_levels] scheduler cap


def _conf(url, cap):
    conf = berth_conf.new_conf()
    conf([], project="berth-bench", default_config_files=[])
    conf.set_override("transport_url", url)
    if cap is not None:
        conf.set_override("scheduler", cap, "upgrade_levels")
    return conf


def _request():
    return ({}, {"instance_uuids": [str(uuid.uuid4())], "num_instances": 1,
                 "instance_type": {"name": "m1.small", "memory_mb": 2048, "vcpus": 1, "root_gb": 20}}, {})


def round_of(url, cap, threads, requests):
    """One round: ``threads`` threads share ``requests`` run_instance casts, each cast in turn.
    Returns (messages per request, client CPU ms per request, broker CPU ms per request, requests
    per second)."""
    transport = rpc.get_transport(_conf(url, cap))
    try:
        transport.reach(10)
        queue = topology.shared_queue(transport, TOPIC)
        with transport.connection("bench") as conn:
            queue(conn.default_channel).declare()
            queue(conn.default_channel).purge()
        client = SchedulerClient(transport)
        client.run_instance(*_request())  # connected, exchange declared: not counted
        each = [requests // threads + (i < requests % threads) for i in range(threads)]
        made = [[_request() for _ in range(n)] for n in each]
        start = threading.Barrier(threads + 1)

        def cast(mine):
            start.wait()
            for request in mine:
                client.run_instance(*request)

        workers = [threading.Thread(target=cast, args=(mine,), daemon=True) for mine in made]
        for worker in workers:
            worker.start()
        broker = process_cpu.Window()
        broker.start({"broker": process_cpu.listening(urllib.parse.urlsplit(url).port or 5672)})
        start.wait()
        cpu, wall = time.process_time(), time.perf_counter()
        for worker in workers:
            worker.join()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        broker_cpu = broker.stop()["broker"]
        with transport.connection("bench") as conn:
            channel = conn.default_channel
            # Each cast returned once its message was confirmed: the broker holds them all.
            messages = channel.queue_declare(queue=queue.name, passive=True).message_count - 1
            queue(channel).purge()
        return messages / requests, 1000 * cpu / requests, 1000 * broker_cpu / requests, requests / wall
    finally:
        transport.cleanup()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.threaded_casts", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=32, help="threads casting (default 32)")
    parser.add_argument("--requests", type=int, default=3200, help="requests a round (default 3200)")
    parser.add_argument("--rounds", type=int, default=6, help="rounds of each way, alternated (default 6)")
    parser.add_argument("--transport-url", default=os.environ.get(
        "BERTH_BENCH_TRANSPORT_URL", "rabbit://guest:guest@127.0.0.1:5672/"))
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    for name in ("threads", "requests", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be 1 or more, not {getattr(args, name)}")
    if args.requests < args.threads:
        parser.error(f"--requests ({args.requests}) must be at least --threads ({args.threads})")
    try:
        vhost = temporary_vhost(args.transport_url)
        url = vhost.__enter__()
    except (OSError, subprocess.CalledProcessError) as exc:
        parser.error(f"a vhost of the run's own is needed (its 'scheduler' queue is counted and purged), "
                     f"which rabbitmqctl could not make: {exc}")
    figures = {name: [] for name in WAYS}
    try:
        for number in range(args.rounds):
            # A B, then B A: neither way always runs on the broker the other just loaded.
            names = list(WAYS) if number % 2 == 0 else list(WAYS)[::-1]
            for name in names:
                figures[name].append(round_of(url, WAYS[name], args.threads, args.requests))
    finally:
        vhost.__exit__(None, None, None)
    print(f"# {args.threads} {concurrency.MODE} threads, {args.requests} run_instance casts a round, "
          f"{args.rounds} rounds a way, alternated; median (min-max)")
    for name, rows in figures.items():
        messages, cpu, broker, rate = zip(*rows, strict=True)
        print(f"{name:<15} messages/request {spread(messages, 3)}  CPU ms/request: client {spread(cpu, 3)}, "
              f"broker {spread(broker, 3)}  requests/s {spread(rate, 0)}")
    for column, what in ((1, "client"), (2, "broker")):
        pairs = [g[column] / e[column] for g, e in zip(figures["gathered"], figures["a message each"],
                                                        strict=True)]
        print(f"gathered / a message each, {what} CPU round by round: {spread(pairs, 3)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
