"""A three-node RabbitMQ cluster on this machine, as private processes.

Each node has its own name (berth-c1@localhost...), AMQP port (5701-5703, loopback
only), distribution port, data, log, configuration and plugin files under one
temporary folder, and no plugin (no management). The nodes share the Erlang cookie
of the user running them (~/.erlang.cookie, made if missing). Nothing here reads or
changes the system's RabbitMQ (rabbit@localhost on 5672): its node name, ports,
files and /etc/rabbitmq/rabbitmq-env.conf are all left aside.

The CLI tools are run from RabbitMQ's own folder, as the current user: Debian's
/usr/sbin wrappers would run them as the rabbitmq user, with that user's cookie.
"""

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

RABBITMQ_BIN = Path(os.environ.get("BERTH_TEST_RABBITMQ_BIN", "/usr/lib/rabbitmq/bin"))
FIRST_PORT = int(os.environ.get("BERTH_TEST_CLUSTER_PORT", "5701"))
# The CLI tools take a distribution port of their own from a range: not the system's.
CTL_DIST_PORTS = (FIRST_PORT + 30000, FIRST_PORT + 30030)


def ensure_cookie():
    """~/.erlang.cookie, made (random, owner-read-only) if missing: the nodes and the CLI
    tools must share it, and three nodes starting at once would race to make it."""
    path = Path.home() / ".erlang.cookie"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(20).upper())
    return path


def port_free(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


class Node:
    def __init__(self, base, index, port, prefix="berth-c"):
        self.short = f"{prefix}{index}"
        self.name = f"{self.short}@localhost"
        self.port = port
        self.dist_port = port + 20000
        self.dir = base / self.short
        self.process = None

    def environment(self):
        d = self.dir
        return {
            "RABBITMQ_CONF_ENV_FILE": str(d / "rabbitmq-env.conf"),
            "RABBITMQ_NODENAME": self.name,
            "RABBITMQ_USE_LONGNAME": "false",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(d / "mnesia"),
            "RABBITMQ_LOG_BASE": str(d / "log"),
            "RABBITMQ_CONFIG_FILE": str(d / "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(d / "advanced.config"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(d / "enabled_plugins"),
            "RABBITMQ_PLUGINS_EXPAND_DIR": str(d / "plugins-expand"),
            "RABBITMQ_PID_FILE": str(d / "rabbitmq.pid"),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            # Where a node starts the port mapper (none runs yet), it listens on loopback only.
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "HOME": str(Path.home()),  # Erlang reads the cookie from $HOME, which it needs set
        }

    def write_files(self):
        for sub in ("mnesia", "log"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        (self.dir / "rabbitmq-env.conf").write_text("")
        (self.dir / "enabled_plugins").write_text("[].\n")
        (self.dir / "rabbitmq.conf").write_text(
            f"listeners.tcp.local = 127.0.0.1:{self.port}\n"
            "loopback_users.guest = true\n"
            "log.console = false\n"
            "log.file.level = info\n"
        )

    @property
    def log(self):
        return self.dir / "log" / f"{self.name}.log"


class RabbitCluster:
    """Three nodes clustered with join_cluster; ``close()`` stops them all, killing what
    does not stop. ``prefix`` names the nodes (``<prefix>1@localhost``...): clusters that may
    run at once, each of another test, need their own."""

    def __init__(self, base, size=3, first_port=FIRST_PORT, prefix="berth-c"):
        self.base = Path(base)
        self.nodes = [Node(self.base, i + 1, first_port + i, prefix) for i in range(size)]
        self.booted_in = self.started_in = None

    # -- the CLI tools -------------------------------------------------------------------

    def ctl(self, node, *args, tool="rabbitmqctl", check=True, timeout=120):
        """Run ``tool -n node args`` and return the CompletedProcess."""
        env = dict(os.environ,
                   HOME=str(Path.home()),
                   RABBITMQ_CONF_ENV_FILE=str(node.dir / "rabbitmq-env.conf"),
                   RABBITMQ_CTL_DIST_PORT_MIN=str(CTL_DIST_PORTS[0]),
                   RABBITMQ_CTL_DIST_PORT_MAX=str(CTL_DIST_PORTS[1]))
        done = subprocess.run([str(RABBITMQ_BIN / tool), "-q", "-n", node.name, *args],
                              capture_output=True, text=True, env=env, timeout=timeout)
        if check and done.returncode:
            raise AssertionError(f"{tool} -n {node.name} {' '.join(args)} exited with "
                                 f"{done.returncode}: {done.stdout}{done.stderr}")
        return done

    def node(self, name):
        return next(n for n in self.nodes if n.name == name)

    # -- life cycle ----------------------------------------------------------------------

    def start(self, timeout=180):
        began = time.monotonic()
        ensure_cookie()
        taken = [n.port for n in self.nodes if not port_free(n.port)]
        taken += [n.dist_port for n in self.nodes if not port_free(n.dist_port)]
        if taken:
            raise AssertionError(f"ports {taken} are in use: a cluster left by an earlier run? "
                                 f"({RABBITMQ_BIN}/rabbitmqctl -n berth-c1@localhost stop, and c2, c3)")
        for node in self.nodes:
            node.write_files()
            self._spawn(node)
        for node in self.nodes:
            self.await_startup(node, timeout)
        self.booted_in = time.monotonic() - began
        first = self.nodes[0]
        for node in self.nodes[1:]:
            self.ctl(node, "stop_app")
            self.ctl(node, "join_cluster", first.name)
            self.ctl(node, "start_app")
        running = self.running_nodes()
        if sorted(running) != sorted(n.name for n in self.nodes):
            raise AssertionError(f"the cluster runs {running}, not all of {[n.name for n in self.nodes]}")
        self.started_in = time.monotonic() - began
        return self

    @staticmethod
    def _spawn(node):
        with open(node.dir / "stdout.log", "ab") as out:
            node.process = subprocess.Popen(
                [str(RABBITMQ_BIN / "rabbitmq-server")], stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=dict(os.environ, **node.environment()),
                cwd=node.dir, start_new_session=True)

    def await_startup(self, node, timeout=180):
        """Wait until ``node``'s RabbitMQ application runs; fail at once if its process died."""
        deadline = time.monotonic() + timeout
        while True:
            if node.process is not None and node.process.poll() is not None:
                raise AssertionError(f"{node.name} exited with {node.process.returncode}:\n"
                                     f"{self.tail(node)}")
            if not self.ctl(node, "await_startup", "--timeout", "10", check=False, timeout=60).returncode:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{node.name} did not start within {timeout} s:\n{self.tail(node)}")
            time.sleep(0.5)

    def tail(self, node, chars=3000):
        parts = []
        for path in (node.dir / "stdout.log", node.log):
            if path.exists():
                parts.append(f"--- {path}:\n{path.read_text(errors='replace')[-chars:]}")
        return "\n".join(parts)

    def running_nodes(self):
        """The nodes whose application runs, as the first node able to answer says."""
        failures = []
        for node in self.nodes:
            if node.process is None or node.process.poll() is not None:
                continue
            done = self.ctl(node, "cluster_status", "--formatter", "json", check=False)
            if not done.returncode:
                return json.loads(done.stdout)["running_nodes"]
            failures.append(f"{node.name}: {done.stdout}{done.stderr}".strip())
        raise AssertionError("no node answers cluster_status:\n" + "\n".join(failures))

    def stop_app(self, node):
        self.ctl(node, "stop_app")

    def start_app(self, node, timeout=180):
        self.ctl(node, "start_app")
        self.await_startup(node, timeout)

    def kill(self, node):
        """Kill ``node`` whole (SIGKILL), as a crash or a power cut would."""
        self._kill_group(node)
        node.process = None

    def restart(self, node, timeout=180):
        """Start a killed node again on its data: it rejoins the cluster by itself."""
        self._spawn(node)
        self.await_startup(node, timeout)

    @staticmethod
    def _kill_group(node):
        # The group: erl_child_setup and inet_gethost outlive the beam process otherwise.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.process.pid, signal.SIGKILL)
        node.process.wait()

    def close(self, timeout=30):
        """Stop every node; kill the process group of any that is still up after ``timeout``."""
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                with contextlib.suppress(Exception):
                    self.ctl(node, "stop", check=False, timeout=timeout)
        for node in self.nodes:
            if node.process is None:
                continue
            try:
                node.process.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
            self._kill_group(node)

    # -- what the tests use --------------------------------------------------------------

    def transport_url(self, vhost, user="guest", password="guest"):
        hosts = ",".join(f"{user}:{password}@127.0.0.1:{n.port}" for n in self.nodes)
        return f"rabbit://{hosts}/{vhost}"

    @contextlib.contextmanager
    def temporary_vhost(self, prefix="berth-cluster"):
        """A fresh vhost on the cluster for guest, deleted afterwards; yields the
        transport_url naming every node."""
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        first = self.nodes[0]
        self.ctl(first, "add_vhost", name)
        try:
            self.ctl(first, "set_permissions", "-p", name, "guest", ".*", ".*", ".*")
            yield self.transport_url(name)
        finally:
            self.ctl(self.running(), "delete_vhost", name, check=False)

    def running(self):
        """A node whose application runs (the first such)."""
        names = set(self.running_nodes())
        return next(n for n in self.nodes if n.name in names)

    def queues(self, vhost, node=None):
        """{queue name: {type, leader, members, online, consumers, messages}} of a vhost, as the
        cluster (seen from ``node``, a running one by default) lists them."""
        out = self.ctl(node or self.running(), "list_queues", "-p", vhost, "name", "type", "leader",
                       "members", "online", "consumers", "messages", "--formatter", "json").stdout
        return {q["name"]: q for q in json.loads(out or "[]")}

    def leader(self, vhost, queue, node=None):
        """The node leading a quorum queue."""
        return self.node(self.queues(vhost, node)[queue]["leader"])


@contextlib.contextmanager
def private_node(base, port, prefix):
    """A one-node RabbitMQ of a test's (or a module's) own, on ``port``, named
    ``<prefix>1@localhost``: stopping it disturbs no other test. Yields its RabbitCluster."""
    node = RabbitCluster(base, size=1, first_port=port, prefix=prefix).start()
    try:
        yield node
    finally:
        node.close()
