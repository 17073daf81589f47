"""Real Berth processes on the real RabbitMQ and PostgreSQL, for functional tests."""

import collections
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import scheduler
from berth_contract import flavors
from compute_agent import conf as agent_conf
from scheduler import conf as berth_conf
from scheduler import rpc
from scheduler.client import SchedulerClient
from scheduler.cmd.instance_commands import build_request
from tests.fixtures import (  # noqa: F401 (tests import them here)
    FAST_PATH_OPTIONS,
    FAST_PATHS,
    RABBIT_URL,
    temporary_database,
    temporary_vhost,
)

#: Where the code these tests import lives: the processes a fleet starts import it too. They
#: start in a temporary directory, so that without it they would import whatever Berth is
#: installed, another checkout's code when the tests run from a second work tree.
CODE_ROOT = str(Path(scheduler.__file__).resolve().parents[1])


def child_env(env=None):
    """The environment of a process a test starts: this one's, ``env`` over it, CODE_ROOT first
    on PYTHONPATH (before ``env``'s own entries)."""
    merged = dict(os.environ, **(env or {}))
    merged["PYTHONPATH"] = os.pathsep.join(filter(None, (CODE_ROOT, merged.get("PYTHONPATH"))))
    return merged


def write_conf(path, sections, fake_group=True):
    """Write ``sections`` as an ini file; with ``fake_group``, the fake driver's options given by
    their old names (``[compute_agent] fake_X``, deprecated aliases) as ``[fake] X`` (an agent of the
    previous release reads only the old names)."""
    sections = {section: dict(values) for section, values in sections.items()}
    for name in [n for n in sections.get("compute_agent", {}) if fake_group and n.startswith("fake_")]:
        sections.setdefault("fake", {})[name[len("fake_"):]] = sections["compute_agent"].pop(name)
    lines = []
    for section, values in sections.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {v}" for k, v in values.items()]
        lines.append("")
    path.write_text("\n".join(lines))
    return path


class Fleet:
    """A scheduler and agents as separate OS processes sharing one config file."""

    def __init__(self, tmp_path, database_url, transport_url, **overrides):
        self.tmp = tmp_path
        self.exchange = f"berth-func-{uuid.uuid4().hex[:8]}"
        sections = {
            "DEFAULT": {
                "transport_url": transport_url,
                "control_exchange": self.exchange,
                "state_path": tmp_path / "state",
                "debug": "true",
            },
            "database": {"connection": database_url},
            "scheduler": {"periodic_interval": 1},
            "compute_agent": {"driver": "fake", "report_interval": 2, "report_min_interval": 0.1},
            # Many daemons on one machine: each takes a free port for its metrics (the log says which).
            "prometheus": {"listen_port": 0},
        }
        for group, name in FAST_PATH_OPTIONS:
            sections.setdefault(group or "DEFAULT", {})[name] = str(FAST_PATHS).lower()
        for key, value in overrides.items():
            section, _, name = key.partition("__")
            sections.setdefault(section, {})[name] = value
        self.conf_file = write_conf(tmp_path / "berth.conf", sections)
        self.processes = {}
        self.conf = berth_conf.new_conf()
        agent_conf.register_opts(self.conf)
        self.conf(["--config-file", str(self.conf_file)], project="berth-test", default_config_files=[])
        self.transport = rpc.get_transport(self.conf)
        self.client = SchedulerClient(self.transport, timeout=30)
        # For polling: a call sent before the scheduler's queue exists is lost, and
        # waiting out the long timeout would only slow start-up down.
        self.probe = SchedulerClient(self.transport, timeout=2)

    def _spawn(self, name, module, *extra, env=None):
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 (lives as long as the process)
        proc = subprocess.Popen(
            [sys.executable, "-m", module, "--config-file", str(self.conf_file), *extra],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.tmp,
            env=child_env(env),
        )
        self.processes[name] = proc
        return proc

    def start_scheduler(self, name="scheduler", env=None, module="scheduler.cmd.scheduler"):
        conf_file = write_conf(self.tmp / f"{name}.conf", {"DEFAULT": {"host": name}})
        return self._spawn(name, module, "--config-file", str(conf_file), env=env)

    def start_schedulers(self, names, timeout=60, env=None, module="scheduler.cmd.scheduler"):
        """Start a scheduler process per name; return once each answers a call."""
        for name in names:
            self.start_scheduler(name, env=env, module=module)
        for name in names:
            self.wait(lambda n=name: self.scheduler_client(n).call({}, "list_hosts") is not None,
                      timeout, f"{name} to answer")

    def scheduler_client(self, name):
        """An RPC client for one scheduler process alone (its scheduler.<host> queue)."""
        return rpc.RPCClient(self.transport, rpc.Target(topic="scheduler", server=name), timeout=5)

    def start_agent(self, host, name=None, module="compute_agent.cmd.agent", env=None, default=None,
                    sections=None, **options):
        """An agent process for ``host`` (named ``name`` among the fleet's processes, the host
        by default); ``default``: more [DEFAULT] options, e.g. its own state_path; ``sections``:
        options of other groups, {group: {name: value}}."""
        name = name or host
        sections = {**(sections or {}), "DEFAULT": {"host": host, **(default or {})},
                    "compute_agent": options}
        conf_file = write_conf(self.tmp / f"{name}.conf", sections,
                               fake_group=module == "compute_agent.cmd.agent")
        return self._spawn(name, module, "--config-file", str(conf_file), env=env)

    def stop(self, name, sig=signal.SIGTERM, timeout=30):
        proc = self.processes.pop(name)
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def close(self):
        for name in list(self.processes):
            self.stop(name)
        self.transport.cleanup()

    def log(self, name):
        return (self.tmp / f"{name}.log").read_text(errors="replace")

    def metrics_port(self, name, timeout=30):
        """The port process ``name`` serves its Prometheus metrics on, once its log says."""
        serving = re.compile(r"Serving Prometheus metrics on http://127\.0\.0\.1:(\d+)/metrics")

        def found():
            match = serving.search(self.log(name))
            return int(match.group(1)) if match else None

        return self.wait(found, timeout, f"{name} to serve its metrics")

    def complaints(self, per_log=15):
        """The last warnings and errors each process logged, for a failure to show."""
        parts = []
        for path in sorted(self.tmp.glob("*.log")):
            lines = [
                line
                for line in path.read_text(errors="replace").splitlines()
                if " WARNING " in line or " ERROR " in line or " CRITICAL " in line
            ]
            if lines:
                parts.append(f"--- {path.stem}: {len(lines)} warnings and errors, the last:")
                parts.extend(lines[-per_log:])
        return "\n".join(parts) or "no process logged a warning or an error"

    def check_alive(self):
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited with {proc.returncode}:\n{self.log(name)[-3000:]}")

    def cli(self, *args, timeout=120):
        return subprocess.run(
            [sys.executable, "-m", "scheduler.cmd.cli", "--config-file", str(self.conf_file), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.tmp,
            env=child_env(),
        )

    def wait(self, predicate, timeout=120, what="a condition", interval=0.25, last_seen=None):
        """Poll predicate until it is true; on timeout, say what last_seen() reports."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            try:
                value = predicate()
            except rpc.MessagingTimeout:
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                seen = f"; last seen: {last_seen()}" if last_seen else ""
                raise AssertionError(
                    f"timed out after {timeout} s waiting for {what}{seen}\n{self.complaints()}"
                )
            time.sleep(interval)

    def hosts(self):
        return {h["host"]: h for h in self.probe.list_hosts({})}

    def instances(self, uuids=None, include_deleted=True):
        found = {i["uuid"]: i for i in self.client.list_instances({}, include_deleted=include_deleted)}
        return found if uuids is None else {u: found[u] for u in uuids if u in found}

    def wait_hosts_up(self, names, timeout=60):
        names = set(names)
        return self.wait(
            lambda: names <= {h for h, v in self.hosts().items() if v["state"] == "up"},
            timeout,
            f"hosts {sorted(names)} to report",
        )

    def boot(self, flavor="m1.tiny", count=1, requests=1, hints=None, client=None, bundled=False):
        """Cast ``requests`` run_instance requests of ``count`` instances each (``flavor``: a
        name of the default catalog or a flavor dict) through ``client`` (default: the fleet's),
        a hundred to a message when ``bundled`` (run_instances); the instances' UUIDs, in the
        order cast."""
        flavor = flavors.get(flavor) if isinstance(flavor, str) else flavor
        client = client or self.client
        uuids, casts = [], []
        for _ in range(requests):
            spec, props = build_request(flavor, count, hints or ())
            casts.append(({}, spec, props))
            uuids += spec["instance_uuids"]
        if bundled:
            client.run_instances(casts)
        else:
            for cast in casts:
                client.run_instance(*cast)
        return uuids

    def wait_states(self, uuids, states, timeout=180):
        found = {}

        def settled():
            found.clear()
            found.update(self.instances(uuids))
            return (
                dict(found)
                if len(found) == len(uuids) and all(i["state"] in states for i in found.values())
                else None
            )

        def census():
            counts = collections.Counter(
                f"{i['state']} on {i.get('host') or 'no host'} (attempt {i.get('attempts')})"
                for i in found.values()
            )
            missing = len(set(uuids) - set(found))
            return ", ".join(f"{n} {k}" for k, n in counts.most_common()) + f"; {missing} unknown"

        return self.wait(settled, timeout, f"{len(uuids)} instances to reach {states}", last_seen=census)
