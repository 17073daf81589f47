"""A simulated fleet: many fake compute agents served by one process.

Every agent keeps its own ResourceTracker (the real agent's accounting),
claims what the scheduler casts to ``compute.<host>``, reports it ACTIVE
(builds take no time, so there is no BUILDING to tell) and sends its resource
report every report_interval. One queue bound to ``compute.*`` carries the
whole fleet's traffic, so a thousand agents cost one connection. What waits
on it is handled in batches: the casts a batch causes go out together in one
publisher batch, and its messages are acked, with one ack, once the broker
confirmed them.
"""

import logging
import signal
import sys
import threading

from kombu import Consumer, Queue
from oslo_config import cfg

from compute_agent import conf as agent_conf
from compute_agent.resource_tracker import ClaimFailed, ResourceTracker
from scheduler import concurrency, rpc
from scheduler.client import SchedulerClient
from scheduler.process import running
from scheduler.process import startup as config
from scheduler.rpc import envelope, topology

LOG = logging.getLogger(__name__)
PROG = "berth-fleet-sim"
BATCH = 256  # messages handled (and prefetched) at most at a time

cli_opts = [
    cfg.IntOpt("hosts", default=1000, min=1, help="How many agents to simulate."),
    cfg.StrOpt("prefix", default="sim", help="Agents are named <prefix>-000001 ..."),
]


def host_names(prefix, count):
    return [f"{prefix}-{i:06d}" for i in range(1, count + 1)]


class FleetSimulator:
    def __init__(self, conf, transport, hosts):
        self.conf = conf
        self.transport = transport
        agent = conf.compute_agent
        totals = {"memory_mb": conf.fake.memory_mb, "local_gb": conf.fake.local_gb,
                  "vcpus": conf.fake.vcpus}
        self.trackers = {
            h: ResourceTracker(h, totals, reserved_host_memory_mb=agent.reserved_host_memory_mb,
                               reserved_host_disk_mb=agent.reserved_host_disk_mb,
                               reserved_host_cpus=agent.reserved_host_cpus)
            for h in hosts
        }
        self.scheduler = SchedulerClient(transport)
        self.stopping = threading.Event()
        self.claimed = self.refused = 0
        self.received = []  # messages not handled yet

    def report_all(self):
        with self.transport.publisher.batch():
            for host, tracker in self.trackers.items():
                self.scheduler.report_resources({}, host, tracker.report())

    def _reports(self):
        interval = self.conf.compute_agent.report_interval
        while not self.stopping.wait(interval):
            self.report_all()

    def on_message(self, message):
        self.received.append(message)

    def _process(self):
        """Handle the messages received, send what they cause in one batch, then ack them."""
        received, self.received = self.received, []
        try:
            with self.transport.publisher.batch():
                for message in received:
                    self._handle(message)
        except rpc.MessageDeliveryFailure:
            LOG.exception("Cannot send what %d messages caused; they come again", len(received))
            for message in received:
                message.requeue()
            return
        if received and self.transport.is_rabbit:
            # One ack settles every message delivered up to the last one on the channel.
            max(received, key=lambda message: message.delivery_tag).ack(multiple=True)
            return
        for message in received:
            message.ack()

    def _handle(self, message):
        try:
            msg = envelope.unwrap(envelope.decode(message))
            host = message.delivery_info["routing_key"].partition(".")[2]
            tracker = self.trackers.get(host)
            if tracker is None:
                return
            for cast in envelope.bundled_casts(msg) or [msg]:  # several builds to a host: a bundle
                args = cast.get("args", {})
                if cast.get("method") == "run_instance":
                    self._build(host, tracker, args)
                elif cast.get("method") == "terminate_instance":
                    tracker.free(args["instance_uuid"])
                    self.scheduler.instance_update({}, args["instance_uuid"], host, "DELETED")
        except Exception:
            LOG.exception("Simulated agent failed on a message")

    def _build(self, host, tracker, args):
        instance, props = args["instance"], args.get("filter_properties") or {}
        try:
            claimed = tracker.claim(instance["uuid"], instance["flavor"], props.get("limits"))
        except ClaimFailed as exc:
            self.refused += 1
            retry = props.setdefault("retry", {"num_attempts": 1, "hosts": []})
            retry["hosts"].append([host, host])
            retry["exc_reason"] = f"{host}: {exc}"
            props.pop("limits", None)
            self.scheduler.run_instance({}, args["request_spec"], props)
            return
        self.claimed += claimed  # False: a redelivered request, told ACTIVE again
        self.scheduler.instance_update({}, instance["uuid"], host, "ACTIVE")

    def _drain(self, conn):
        """Receive what waits already, up to BATCH messages."""
        while len(self.received) < BATCH:
            try:
                conn.drain_events(timeout=0)
            except TimeoutError:
                return

    def run(self):
        queue = Queue(f"{self.conf.prefix}-fleet", exchange=topology.topic_exchange(self.transport),
                      routing_key="compute.*", durable=False, auto_delete=True)
        concurrency.spawn(self._reports, name="fleet-reports")
        self.report_all()
        with self.transport.connection("fleet-sim") as conn:
            with Consumer(conn, [queue], on_message=self.on_message, accept=["json"],
                          prefetch_count=BATCH):
                while not self.stopping.is_set():
                    if self.transport.is_rabbit:
                        # Idle (a scheduler slow to start), the broker would drop us without these.
                        conn.heartbeat_check(rate=2)
                    try:
                        conn.drain_events(timeout=0.5)
                    except TimeoutError:
                        continue
                    self._drain(conn)
                    self._process()
        LOG.info("Fleet stopped: %d claimed, %d refused", self.claimed, self.refused)


def main(argv=None):
    conf = config.load(sys.argv[1:] if argv is None else argv, PROG,
                       register=[agent_conf.register_opts], cli_opts=cli_opts)
    config.setup_logging(conf, PROG)
    transport = rpc.get_transport(conf)
    fleet = FleetSimulator(conf, transport, host_names(conf.prefix, conf.hosts))
    running.settle_garbage_collector()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: fleet.stopping.set())
    try:
        fleet.run()
    finally:
        transport.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
