"""End to end over a real broker: cast run_instance, wait for ACTIVE.

Starts a real berth-scheduler process and a simulated fleet process on a
fresh RabbitMQ vhost (when rabbitmqctl is at hand) and a fresh database,
casts single-instance requests as fast as one client can, and times each
instance from its cast to the moment the scheduler recorded it ACTIVE.

From the first cast to the moment every instance has settled, it also reads
the CPU each process used (the schedulers, the fleet, this client, the broker
found by the port it listens on, the PostgreSQL backends of the run's
database), the messages each kind of process sent (the schedulers' counters,
scraped from their metrics endpoints, and this client's) and the schedulers'
claim conflicts: each per placement.
"""

import contextlib
import datetime
import os
import queue
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid

import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families

from benchmarks import process_cpu
from benchmarks.fleet_sim import host_names
from benchmarks.report_e2e import code_of
from benchmarks.services import temporary_database, temporary_vhost
from benchmarks.summary import spread
from scheduler import conf as berth_conf
from scheduler import rpc
from scheduler.client import SchedulerClient
from scheduler.simulation.host_tables import FLAVORS
from scheduler.telemetry import rpc_metrics

CAST_CHUNK = 100  # run_instance casts per publisher batch
BATCH_SIZE = 512  # the schedulers' [scheduler] batch_size


@contextlib.contextmanager
def _vhost(url, queue_version=None):
    """A fresh vhost on ``url``'s broker when rabbitmqctl can make one, else ``url`` as it is.
    With ``queue_version`` (1 or 2), a policy on the fresh vhost gives its classic queues that
    version (RabbitMQ's queue-version); without a fresh vhost that cannot be done, and is refused."""
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(temporary_vhost(url))
        except (OSError, subprocess.CalledProcessError):
            if queue_version:
                raise RuntimeError("a queue version needs a vhost of the run's own, which "
                                   "rabbitmqctl could not make") from None
        else:
            if queue_version:
                vhost = urllib.parse.unquote(urllib.parse.urlsplit(url).path[1:])
                subprocess.run(["rabbitmqctl", "-q", "set_policy", "-p", vhost, "queue-version", ".*",
                                f'{{"queue-version":{queue_version}}}', "--apply-to", "queues"],
                               check=True, capture_output=True)
        yield url


def _stop(procs):
    """Terminate the run's processes (killed after 30 s) and forget them."""
    for proc in procs.values():
        proc.terminate()
    for proc in procs.values():
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    procs.clear()


@contextlib.contextmanager
def _database(tmp):
    """A fresh PostgreSQL database when one is reachable, else SQLite in ``tmp``."""
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(temporary_database())
        except Exception:
            url = f"sqlite:///{tmp}/bench.sqlite"
        yield url


def host_scale(n_hosts, n_instances):
    """How many times the simulated hosts' default size (64 vCPUs, 256 GiB, 8,000 GB) they get, so
    that a long run's instances (the flavors cycled: 2,218 MiB on average) all fit: one at 60
    instances a host or fewer."""
    return max(1, -(-n_instances // (60 * n_hosts)))


def _write_conf(path, transport_url, database_url, tmp, batch_size, prefer_owned_hosts, scale=1):
    path.write_text(f"""[DEFAULT]
transport_url = {transport_url}
state_path = {tmp}/state
host = bench-scheduler
[database]
connection = {database_url}
[scheduler]
periodic_interval = 2
batch_size = {batch_size}
prefer_owned_hosts = {str(prefer_owned_hosts).lower()}
[compute_agent]
report_interval = 10
fake_memory_mb = {262144 * scale}
fake_local_gb = {8000 * scale}
fake_vcpus = {64 * scale}
[prometheus]
listen_port = 0
""")


def _wait(predicate, timeout, what, procs):
    """Wait until ``predicate()``; fail at once if one of ``procs`` ({name: Popen}) ended."""
    deadline = time.monotonic() + timeout
    while not predicate():
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with status {proc.returncode} while waiting for {what}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.5)


SERVING = re.compile(rb"Serving Prometheus metrics on (http://\S+/metrics)")


def _metrics_url(log_path):
    """The metrics URL a process logged at start, or None before it did."""
    match = SERVING.search(log_path.read_bytes())
    return match.group(1).decode() if match else None


def _counters(urls):
    """{(name, labels...): value} of the counters served at ``urls``, summed over them."""
    total = {}
    for url in urls:
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        for family in text_string_to_metric_families(text):
            if family.type != "counter":
                continue
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    key = (sample.name, *sorted(sample.labels.items()))
                    total[key] = total.get(key, 0.0) + sample.value
    return total


def _own_casts():
    """{("casts", topic, method): casts, ("bundles", topic): bundles, ("bundled", topic): casts
    in them} this process sent."""
    sent = {}
    for kind, counter in (("casts", rpc_metrics.CASTS), ("bundles", rpc_metrics.BUNDLES),
                          ("bundled", rpc_metrics.BUNDLED_CASTS)):
        for family in counter.collect():
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    sent[(kind, *sample.labels.values())] = sample.value
    return sent


def _messages(before, after, casts_before, casts_after, workers):
    """Messages published during the window, by kind: {kind: count}."""
    def delta(name, **labels):
        return sum(v - before.get(k, 0.0) for k, v in after.items()
                   if k[0] == name and all((n, w) in k[1:] for n, w in labels.items()))

    handled = {}
    for key in after:
        if key[0] == "berth_rpc_messages_total":
            labels = dict(key[1:])
            handled[labels["method"]] = handled.get(labels["method"], 0) + delta(key[0], **labels)

    def own(kind):
        return sum(v - casts_before.get(k, 0.0) for k, v in casts_after.items() if k[0] == kind)

    client = own("casts")
    # The messages the client's casts took: a bundle is one, however many it carried.
    client_messages = client - own("bundled") + own("bundles")
    sent = {}
    for key in after:
        if key[0] == "berth_rpc_casts_total":
            labels = dict(key[1:])
            sent[labels["method"]] = sent.get(labels["method"], 0) + delta(key[0], **labels)
    kinds = {
        "cast in": client_messages,
        "build out": sent.pop("run_instance", 0),
        "update back": handled.pop("instance_update", 0),
        "sent back": handled.pop("run_instance", 0) - client,
        # A fanout: each scheduler handles its own copy of one publish.
        "report": handled.pop("report_resources", 0) / workers,
    }
    kinds.update({f"{m} out": n for m, n in sent.items() if n})
    kinds.update({f"{m} in": n for m, n in handled.items() if n})
    return kinds


def _cast(transport, client, n_instances, rate, bundled=False):
    """Cast ``n_instances`` run_instance requests at ``rate`` a second (0: at once), each chunk
    in bundles when ``bundled`` (SchedulerClient.run_instances), else a message each;
    returns ({uuid: time cast}, seconds the casting took)."""
    cast_at = {}
    # Paced: chunks of about 10 ms of the offered rate; else chunks of CAST_CHUNK at once.
    chunk_size = max(1, min(CAST_CHUNK, int(rate // 100))) if rate else CAST_CHUNK
    start = time.time()
    for number, chunk in enumerate(range(0, n_instances, chunk_size)):
        if rate:
            time.sleep(max(0.0, start + number * chunk_size / rate - time.time()))
        # One publisher batch: sent together, confirmed with one wait.
        with transport.publisher.batch():
            requests = []
            for i in range(chunk, min(chunk + chunk_size, n_instances)):
                instance_uuid = str(uuid.uuid4())
                cast_at[instance_uuid] = time.time()
                requests.append(({}, {"instance_uuids": [instance_uuid], "num_instances": 1,
                                      "instance_type": FLAVORS[i % 3]}, {}))
            if bundled:
                client.run_instances(requests)
            else:
                for request in requests:
                    client.run_instance(*request)
    return cast_at, time.time() - start


def _cast_from_threads(client, n_instances, rate, threads):
    """Cast ``n_instances`` run_instance requests at ``rate`` a second (0: at once) as an API
    service's ``threads`` workers would: each takes the next request that came and casts it alone
    (SchedulerClient.run_instance, which returns once the broker has it); returns ({uuid: time
    the request came}, seconds the casting took)."""
    cast_at = {}
    requests = queue.Queue()

    def worker():
        while (request := requests.get()) is not None:
            client.run_instance({}, *request)

    workers = [threading.Thread(target=worker, name=f"api-worker-{n}") for n in range(threads)]
    for thread in workers:
        thread.start()
    start = time.time()
    try:
        for i in range(n_instances):
            if rate and i % max(1, int(rate // 100)) == 0:
                time.sleep(max(0.0, start + i / rate - time.time()))
            instance_uuid = str(uuid.uuid4())
            cast_at[instance_uuid] = time.time()
            requests.put(({"instance_uuids": [instance_uuid], "num_instances": 1,
                           "instance_type": FLAVORS[i % 3]}, {}))
    finally:
        for _ in workers:
            requests.put(None)
        for thread in workers:
            thread.join()
    return cast_at, time.time() - start


def measure(transport_url, n_hosts=1000, n_instances=20_000, timeout=600, workers=1, rate=None,
            batch_size=BATCH_SIZE, logs=None, profile=None, prefer_owned_hosts=True, queue_version=None,
            bundled=False, tree=None, client_threads=0):
    """Cast ``n_instances`` run_instance requests at ``rate`` per second (None: as fast
    as one client can) to ``workers`` schedulers and a simulated fleet of ``n_hosts``;
    time each from its cast to ACTIVE. With ``logs``, the processes' logs are kept there; with
    ``profile``, the schedulers run under yappi and leave their profiles there
    (scheduler-N.pstat, for pstats). ``prefer_owned_hosts``: the schedulers' [scheduler] option.
    ``queue_version``: the classic queues' version (1 or 2) by a policy on the run's vhost (None:
    the broker's default). ``bundled``: the requests are cast in bundles (up to 100 a message).
    ``tree``: a source tree (a checkout of an earlier commit, say) whose code the schedulers and the
    fleet run (None: this one's); the requests are cast by this one's client either way.
    ``client_threads``: the requests are cast one a message by that many threads, each waiting for
    its cast's confirm, as an API service's workers cast them (0: one thread casting a publisher
    batch at a time)."""
    import pathlib

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="berth-bench-"))
    procs = {}  # name -> Popen
    try:
        with _vhost(transport_url, queue_version) as url, _database(tmp) as database_url, \
                contextlib.ExitStack() as processes:
            # Stopped before the database and the vhost go: a live process would reconnect to them.
            processes.callback(_stop, procs)
            conf_file = tmp / "berth.conf"
            _write_conf(conf_file, url, database_url, tmp, batch_size, prefer_owned_hosts,
                        host_scale(n_hosts, n_instances))
            args = ["--config-file", str(conf_file)]
            commands = [("fleet_sim", "benchmarks.fleet_sim", ["--hosts", str(n_hosts)])]
            for worker in range(1, workers + 1):
                worker_conf = tmp / f"worker-{worker}.conf"
                worker_conf.write_text(f"[DEFAULT]\nhost = bench-scheduler-{worker}\n")
                commands.append((f"scheduler-{worker}", "scheduler.cmd.scheduler",
                                 ["--config-file", str(worker_conf)]))
            if profile:
                os.makedirs(profile, exist_ok=True)
            cwd, env = code_of(tree)
            for name, module, extra in commands:
                log = open(tmp / f"{name}.log", "ab")  # noqa: SIM115
                profiled = profile and name.startswith("scheduler-")
                runner = ["benchmarks.profiled", os.path.join(profile, f"{name}.pstat")] if profiled else []
                procs[name] = subprocess.Popen([sys.executable, "-m", *runner, module, *args, *extra],
                                               stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env)
            conf = berth_conf.new_conf()
            conf(args, project="berth-bench", default_config_files=[])
            engine = sa.create_engine(database_url)
            database = engine.url.database if engine.url.get_backend_name() == "postgresql" else None
            transport = rpc.get_transport(conf)
            try:
                client = SchedulerClient(transport, timeout=30)
                # Asked before the scheduler's queue exists, a call is lost: ask again soon.
                probe = SchedulerClient(transport, timeout=2)
                expected = set(host_names("sim", n_hosts))

                def fleet_up():
                    try:
                        return expected <= {h["host"] for h in probe.list_hosts({}) if h["state"] == "up"}
                    except rpc.MessagingTimeout:
                        return False

                _wait(fleet_up, 600 if profile else 120, f"{n_hosts} simulated hosts to report", procs)
                schedulers = [name for name in procs if name.startswith("scheduler-")]
                _wait(lambda: all(_metrics_url(tmp / f"{name}.log") for name in schedulers), 60,
                      "the schedulers' metrics endpoints", procs)
                urls = [_metrics_url(tmp / f"{name}.log") for name in schedulers]
                window = process_cpu.Window()
                counters_before, casts_before = _counters(urls), _own_casts()
                window.start({
                    "scheduler": [procs[name].pid for name in schedulers],
                    "fleet": [procs["fleet_sim"].pid],
                    "client": [os.getpid()],
                    "rabbitmq": process_cpu.listening(urllib.parse.urlsplit(url).port or 5672),
                    "postgresql": process_cpu.postgres_pids(engine, database) if database else [],
                })
                if client_threads:
                    cast_at, cast_seconds = _cast_from_threads(client, n_instances, rate, client_threads)
                else:
                    cast_at, cast_seconds = _cast(transport, client, n_instances, rate, bundled)
            finally:
                transport.cleanup()
            try:
                def settled():
                    with engine.connect() as db:
                        return db.execute(sa.text(
                            "SELECT count(*) FROM instances WHERE state IN ('ACTIVE', 'ERROR')"
                        )).scalar() >= n_instances

                _wait(settled, timeout, f"{n_instances} instances to settle", procs)
                cpu = window.stop({"postgresql": process_cpu.postgres_pids(engine, database)}
                                  if database else None)
                counters_after, casts_after = _counters(urls), _own_casts()
                with engine.connect() as db:
                    rows = db.execute(sa.text("SELECT uuid, state, launched_at FROM instances")).all()
            finally:
                engine.dispose()
    except Exception:
        for log in sorted(tmp.glob("*.log")):
            print(f"--- {log.name} (last lines)", file=sys.stderr)
            print("".join(log.read_text(errors="replace").splitlines(True)[-15:]), file=sys.stderr)
        raise
    finally:
        _stop(procs)
        if logs:
            os.makedirs(logs, exist_ok=True)
            for log in tmp.glob("*.log"):
                shutil.copy(log, logs)
        shutil.rmtree(tmp, ignore_errors=True)

    done = sorted(
        (_epoch(r.launched_at), r.uuid) for r in rows if r.state == "ACTIVE" and r.uuid in cast_at
    )
    latencies = sorted(t - cast_at[u] for t, u in done)
    first, last = min(cast_at.values()), done[-1][0]
    # The middle 80% of completions, away from the ramp-up and the tail: it flatters a run whose
    # completions bunch up (e.g. at its end), so the whole run's rate is given beside it.
    low, high = done[len(done) // 10][0], done[(len(done) * 9) // 10][0]
    placements = max(len(done), 1)
    cpu_ms = {name: used * 1e3 / placements for name, used in cpu.items()}
    cpu_ms["total"] = sum(cpu_ms.values())
    messages = {kind: n / placements for kind, n in
                _messages(counters_before, counters_after, casts_before, casts_after, workers).items()}
    conflicts = sum(v - counters_before.get(k, 0.0) for k, v in counters_after.items()
                    if k[0] == "berth_scheduler_claim_conflicts_total")
    return {
        "bench": "e2e",
        "n_hosts": n_hosts,
        "policy": "default",
        "instances": n_instances,
        "active": len(done),
        "errors": sum(r.state == "ERROR" for r in rows),
        "workers": workers,
        "prefer_owned_hosts": prefer_owned_hosts,
        "batch_size": batch_size,
        "queue_version": queue_version,
        "bundled": bundled,
        "code": "this" if tree is None else tree,
        "client_threads": client_threads,
        "offered_per_s": rate,
        "cast_per_s": n_instances / cast_seconds,
        "placements_per_s": len(done) / max(last - first, 1e-9),
        "middle_per_s": (len(done) * 0.8) / max(high - low, 1e-9),
        "seconds": last - first,
        "median_ms": statistics.median(latencies) * 1e3,
        "p99_ms": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1e3,
        "cpu_ms_per_placement": cpu_ms,
        "messages_per_placement": messages,
        "claim_conflicts_per_placement": conflicts / placements,
    }


def describe(row):
    """The rate, CPU and messages per placement of a row, for the table."""
    cpu = row["cpu_ms_per_placement"]
    messages = row["messages_per_placement"]
    preference = "on" if row["prefer_owned_hosts"] else "off"
    owners = "" if row["workers"] == 1 else f" (prefer_owned_hosts {preference})"
    if row.get("queue_version"):
        owners += f" (classic queues v{row['queue_version']})"
    if row.get("bundled"):
        owners += " (requests cast in bundles)"
    if row.get("client_threads"):
        owners += f" (requests cast one a message by {row['client_threads']} client threads)"
    if row.get("code", "this") != "this":
        owners += f" (code of {row['code']})"
    offered = f"offered {row['offered_per_s']:,.0f}/s, " if row.get("offered_per_s") else "cast at once, "
    return (f"{row['workers']} scheduler{'s' if row['workers'] > 1 else ''}{owners}: {offered}"
            f"{row['placements_per_s']:,.0f} placements/s first cast to last ACTIVE "
            f"({row.get('seconds', 0):,.1f} s; middle 80%: {row.get('middle_per_s', 0):,.0f}/s); "
            f"latency median {row['median_ms'] / 1e3:,.2f} s, p99 {row['p99_ms'] / 1e3:,.2f} s; "
            f"CPU ms/placement {cpu['total']:.3f} = "
            + " + ".join(f"{name} {ms:.3f}" for name, ms in cpu.items() if name != "total")
            + f"; messages/placement {sum(messages.values()):.3f} = "
            + " + ".join(f"{kind} {n:.3f}" for kind, n in messages.items() if n)
            + f"; claim conflicts/placement {row['claim_conflicts_per_placement']:.4f}")


def _epoch(value):
    if isinstance(value, str):
        value = datetime.datetime.fromisoformat(value.replace("Z", ""))
    return value.replace(tzinfo=datetime.UTC).timestamp()


def summarise(rows):
    """Lines giving, for each code measured, the medians (min-max) of its runs' figures."""
    by_code = {}
    for row in rows:
        by_code.setdefault(row.get("code", "this"), []).append(row)
    figures = (("placements/s first cast to last ACTIVE", lambda r: r["placements_per_s"], 0),
               ("latency median s", lambda r: r["median_ms"] / 1e3, 2),
               ("latency p99 s", lambda r: r["p99_ms"] / 1e3, 2),
               ("CPU ms/placement", lambda r: r["cpu_ms_per_placement"]["total"], 3),
               ("scheduler CPU ms/placement", lambda r: r["cpu_ms_per_placement"].get("scheduler", 0), 3),
               ("rabbitmq CPU ms/placement", lambda r: r["cpu_ms_per_placement"].get("rabbitmq", 0), 3),
               ("messages/placement", lambda r: sum(r["messages_per_placement"].values()), 3))
    for code, runs in by_code.items():
        yield f"e2e {code}: {len(runs)} run(s), medians (min-max):"
        for name, figure, digits in figures:
            yield f"  {name}: {spread([figure(r) for r in runs], digits)}"
