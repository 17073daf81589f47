"""A server that handles waiting messages in batches, inside one unit of work."""

import contextlib
import threading

from scheduler import rpc
from tests.unit.rpc.conftest import WAIT, Recorder


class Work:
    """A unit of work that records what happened and can be told to fail its commits."""

    def __init__(self, failures=0, failing_size=1):
        self.failures = failures
        self.failing_size = failing_size  # the fewest messages' work a failing commit holds
        self.commits = []
        self.lock = threading.Lock()
        self.current = None

    def __call__(self):
        return self

    def __enter__(self):
        self.current = []
        return self

    def __exit__(self, exc_type, exc, tb):
        with self.lock:
            if self.failures and len(self.current) >= self.failing_size:
                self.failures -= 1
                raise RuntimeError("the database went away")
            self.commits.append(self.current)
        return False

    @contextlib.contextmanager
    def step(self, method, read_only=False):
        mark = len(self.current)
        try:
            yield
        except Exception:
            del self.current[mark:]
            raise


class Endpoint(Recorder):
    def __init__(self, work):
        super().__init__()
        self.work = work
        self.go = threading.Event()

    def record(self, context, **kwargs):
        if kwargs["n"] == 0:
            self.go.wait(WAIT)  # hold the server while the others queue up behind
        self.work.current.append(kwargs["n"])
        super().record(context, **kwargs)

    def refuse(self, context, n):
        self.work.current.append(n)
        raise ValueError("refused")


def serve(transport, topic, endpoint, work, batch_size):
    server = rpc.get_rpc_server(transport, rpc.Target(topic, server="s1"), [endpoint],
                                batch_size=batch_size, unit_of_work=work)
    server.start()
    return server


def test_waiting_messages_share_one_unit_of_work_and_a_failed_step_is_undone_alone(
        transport, topic):
    work = Work()
    endpoint = Endpoint(work)
    client = rpc.RPCClient(transport, rpc.Target(topic))
    server = serve(transport, topic, endpoint, work, batch_size=8)
    for n in range(20):
        client.cast({}, "refuse" if n == 5 else "record", n=n)
    endpoint.go.set()
    try:
        assert endpoint.wait_for(19)
        assert client.call({}, "echo", n=99)["args"] == {"n": 99}
    finally:
        server.stop()
        server.wait()
    committed = [n for batch in work.commits for n in batch]
    assert sorted(committed) == [n for n in range(20) if n != 5]
    assert max(len(batch) for batch in work.commits) > 1
    assert all(len(batch) <= 8 for batch in work.commits)


def test_a_batch_that_fails_to_commit_is_delivered_again(transport, topic):
    # A batch of several: however the server happened to fetch them (a message that fails
    # alone is refused, not tried again: see the server's _handle).
    work = Work(failures=1, failing_size=2)
    endpoint = Endpoint(work)
    client = rpc.RPCClient(transport, rpc.Target(topic))
    server = serve(transport, topic, endpoint, work, batch_size=8)
    for n in range(5):
        client.cast({}, "record", n=n)
    endpoint.go.set()
    try:
        deadline = WAIT
        while sorted(n for batch in work.commits for n in batch) != list(range(5)) and deadline > 0:
            threading.Event().wait(0.05)
            deadline -= 0.05
    finally:
        server.stop()
        server.wait()
    assert sorted(n for batch in work.commits for n in batch) == list(range(5))
    assert len(endpoint.received) > 5  # the first attempt's work was done and thrown away


class Adder:
    """``add`` has a batch form that sees every ``add`` of a batch at once."""

    def __init__(self, work, fail_together=False):
        self.work = work
        self.fail_together = fail_together
        self.groups = []
        self.holding = threading.Event()
        self.go = threading.Event()

    def hold(self, context):
        self.holding.set()
        self.go.wait(WAIT)  # the messages behind it queue up into one batch

    def add(self, context, a, b):
        if b == 0:
            raise ValueError("b must not be 0")
        self.work.current.append(a + b)
        return a + b

    @rpc.batch_of("add")
    def _add_many(self, calls):
        self.groups.append([kwargs["a"] for _, kwargs in calls])
        if self.fail_together and len(calls) > 1:
            raise RuntimeError("the whole group failed")
        outcomes = []
        for context, kwargs in calls:
            try:
                outcomes.append(self.add(context, **kwargs))
            except ValueError as exc:
                outcomes.append(exc)
        return outcomes


def _add_in_one_batch(transport, topic, adder, work, pairs):
    client = rpc.RPCClient(transport, rpc.Target(topic, server="s1"))
    server = serve(transport, topic, adder, work, batch_size=16)
    results = []
    try:
        client.cast({}, "hold")
        assert adder.holding.wait(WAIT)
        threads = [threading.Thread(target=lambda kw=kw: results.append(_outcome(client, kw)))
                   for kw in pairs]
        for thread in threads:
            thread.start()
            threading.Event().wait(0.05)  # queued in this order
        adder.go.set()
        for thread in threads:
            thread.join(WAIT)
    finally:
        server.stop()
        server.wait()
    return sorted(results, key=str)


def _outcome(client, kwargs):
    try:
        return ("ok", kwargs["a"], client.call({}, "add", **kwargs))
    except rpc.RemoteError as exc:
        return ("failed", kwargs["a"], exc.exc_type)


def test_messages_of_a_method_with_a_batch_form_reach_it_together_and_each_gets_its_outcome(
        transport, topic):
    work = Work()
    adder = Adder(work)
    pairs = [{"a": 1, "b": 1}, {"a": 2, "b": 0}, {"a": 3, "c": 1}, {"a": 4, "b": 4}]
    results = _add_in_one_batch(transport, topic, adder, work, pairs)
    assert results == [("failed", 2, "ValueError"), ("failed", 3, "InvalidArguments"),
                       ("ok", 1, 2), ("ok", 4, 8)]
    # The message with arguments the method does not take never reaches the batch form.
    assert adder.groups == [[1, 2, 4]]


def test_a_batch_form_that_fails_as_a_whole_is_replaced_by_one_message_at_a_time(transport, topic):
    work = Work()
    adder = Adder(work, fail_together=True)
    results = _add_in_one_batch(transport, topic, adder, work, [{"a": 1, "b": 1}, {"a": 2, "b": 0},
                                                                {"a": 4, "b": 4}])
    assert results == [("failed", 2, "ValueError"), ("ok", 1, 2), ("ok", 4, 8)]
    assert adder.groups == [[1, 2, 4], [1], [2], [4]]  # then each through the form alone
    assert sorted(n for batch in work.commits for n in batch) == [2, 8]


def test_a_batching_server_prefetches_room_for_two_batches_more(transport, topic):
    work = Work()
    batching = rpc.get_rpc_server(transport, rpc.Target(topic, server="s1"), [Adder(work)],
                                  batch_size=128, unit_of_work=work)
    single = rpc.get_rpc_server(transport, rpc.Target(topic, server="s2"), [Adder(work)])
    configured = transport.conf.oslo_messaging_rabbit.rabbit_qos_prefetch_count
    assert batching._loop._prefetch == max(configured, 384)  # the batch being acked, this one, the next
    assert single._loop._prefetch == configured


class Poisoned(Work):
    """A unit of work whose commit fails whenever it holds ``poison``, as a
    constraint the database checks only at commit would."""

    def __init__(self, poison):
        super().__init__()
        self.poison = poison
        self.attempts = 0

    def __exit__(self, exc_type, exc, tb):
        with self.lock:
            self.attempts += 1
            if exc_type is None and self.poison in self.current:
                raise RuntimeError(f"{self.poison} breaks the commit")
            if exc_type is None:
                self.commits.append(self.current)
        return False


def test_a_batch_that_fails_as_a_whole_is_run_message_by_message_and_the_culprit_dead_lettered(
        transport, topic, caplog):
    work = Poisoned(poison=3)
    endpoint = Endpoint(work)
    client = rpc.RPCClient(transport, rpc.Target(topic))
    server = serve(transport, topic, endpoint, work, batch_size=8)
    for n in range(8):
        client.cast({}, "record", n=n)
    endpoint.go.set()
    try:
        deadline = threading.Event()
        for _ in range(int(WAIT / 0.05)):
            if sorted(n for batch in work.commits for n in batch) == [0, 1, 2, 4, 5, 6, 7] \
                    and server.dead_letters.count == 1:
                break
            deadline.wait(0.05)
        attempts = work.attempts
        deadline.wait(0.5)  # a message handed back for ever would be tried again by now
    finally:
        server.stop()
        server.wait()
    assert sorted(n for batch in work.commits for n in batch) == [0, 1, 2, 4, 5, 6, 7]
    assert server.dead_letters.count == 1
    assert work.attempts == attempts
    assert any("failed together" in r.getMessage() for r in caplog.records)


class Transient(Work):
    """A unit of work whose first commits meet a passing failure."""

    def __exit__(self, exc_type, exc, tb):
        with self.lock:
            if exc_type is None and self.failures:
                self.failures -= 1
                raise rpc.RetryLater("the database is restarting")
            if exc_type is None:
                self.commits.append(self.current)
        return False


def test_a_batch_that_meets_a_passing_failure_is_held_whole_and_tried_again(transport, topic, conf):
    conf.set_override("rabbit_retry_interval", 0.1, group="oslo_messaging_rabbit")
    work = Transient(failures=2)
    endpoint = Endpoint(work)
    client = rpc.RPCClient(transport, rpc.Target(topic))
    server = serve(transport, topic, endpoint, work, batch_size=8)
    for n in range(5):
        client.cast({}, "record", n=n)
    endpoint.go.set()
    try:
        for _ in range(int(WAIT / 0.05)):
            if sorted(n for batch in work.commits for n in batch) == list(range(5)):
                break
            threading.Event().wait(0.05)
    finally:
        server.stop()
        server.wait()
    assert sorted(n for batch in work.commits for n in batch) == list(range(5))
    assert server.dead_letters.count == 0
    assert not [c for c, _ in endpoint.received if c.redelivered]  # held, not handed back to the broker


class Away(Work):
    """A unit of work that cannot begin while its database is away."""

    def __init__(self):
        super().__init__()
        self.away = threading.Event()
        self.attempts = 0

    def __enter__(self):
        self.attempts += 1
        if self.away.is_set():
            raise rpc.RetryLater("the database is unavailable: connection refused")
        return super().__enter__()


class AwayThenRace(Away):
    """A database away, whose first attempt once back loses a race (a deadlock, say)."""

    def __init__(self):
        super().__init__()
        self.race = threading.Event()

    def __enter__(self):
        if not self.away.is_set() and self.race.is_set():
            self.race.clear()
            self.attempts += 1
            raise rpc.RetryLater("the database is unavailable: deadlock detected", soon=True)
        return super().__enter__()


class Hearing:
    def __init__(self):
        self.calls = []

    def deaf(self, since):
        self.calls.append(("deaf", since))

    def heard(self, now):
        self.calls.append(("heard", now))


def test_while_the_database_is_away_casts_wait_unacknowledged_and_calls_are_told_at_once(
        transport, topic, conf, caplog):
    conf.set_override("rabbit_retry_interval", 0.2, group="oslo_messaging_rabbit")
    conf.set_override("rabbit_retry_backoff", 0.2, group="oslo_messaging_rabbit")
    work = Away()
    endpoint = Endpoint(work)
    endpoint.go.set()
    hearing = Hearing()
    server = rpc.get_rpc_server(transport, rpc.Target(topic, server="s1"), [endpoint], batch_size=8,
                                unit_of_work=work, hearing=hearing)
    server.start()
    client = rpc.RPCClient(transport, rpc.Target(topic), timeout=5)
    try:
        work.away.set()
        for n in range(6):
            client.cast({}, "record", n=n)
        for _ in range(int(WAIT / 0.05)):
            if work.attempts >= 3:
                break
            threading.Event().wait(0.05)
        # A caller is not kept waiting for its timeout: it learns at once that nothing was done.
        try:
            client.call({}, "echo", n=1)
        except rpc.RemoteError as exc:
            refusal = exc
        assert refusal.exc_type == "ServiceUnavailable"
        assert "the database is unavailable: connection refused" in refusal.value
        assert "nothing was done" in refusal.value
        assert work.commits == []
        work.away.clear()
        for _ in range(int(WAIT / 0.05)):
            if sorted(n for batch in work.commits for n in batch) == list(range(6)):
                break
            threading.Event().wait(0.05)
    finally:
        server.stop()
        server.wait()
    assert sorted(n for batch in work.commits for n in batch) == list(range(6))
    assert server.dead_letters.count == 0
    assert not [c for c, _ in endpoint.received if c.redelivered]
    # Said once when it began and once when it passed, whatever the number of attempts.
    said = [r.getMessage() for r in caplog.records if r.name == "scheduler.rpc.server"
            and r.levelname == "WARNING"]
    assert len([m for m in said if "; holding " in m]) == 1, said
    assert len([m for m in said if "the failure passed after" in m]) == 1, said
    # The server was deaf from the hold on, and heard again before the held messages ran.
    assert [kind for kind, _ in hearing.calls][:2] == ["deaf", "heard"]


def test_an_outage_ending_in_a_lost_race_is_still_said_over(transport, topic, conf, caplog):
    conf.set_override("rabbit_retry_interval", 0.2, group="oslo_messaging_rabbit")
    conf.set_override("rabbit_retry_backoff", 0.2, group="oslo_messaging_rabbit")
    work = AwayThenRace()
    endpoint = Endpoint(work)
    endpoint.go.set()
    server = rpc.get_rpc_server(transport, rpc.Target(topic, server="s1"), [endpoint], batch_size=8,
                                unit_of_work=work)
    server.start()
    client = rpc.RPCClient(transport, rpc.Target(topic), timeout=5)
    try:
        work.away.set()
        work.race.set()
        for n in range(4):
            client.cast({}, "record", n=n)
        for _ in range(int(WAIT / 0.05)):
            if work.attempts >= 2:
                break
            threading.Event().wait(0.05)
        work.away.clear()
        for _ in range(int(WAIT / 0.05)):
            if sorted(n for batch in work.commits for n in batch) == list(range(4)):
                break
            threading.Event().wait(0.05)
    finally:
        server.stop()
        server.wait()
    assert sorted(n for batch in work.commits for n in batch) == list(range(4))
    assert not work.race.is_set()  # the race was lost once the database was back
    said = [r.getMessage() for r in caplog.records if r.name == "scheduler.rpc.server"
            and r.levelname == "WARNING"]
    assert len([m for m in said if "; holding " in m]) == 1, said
    assert len([m for m in said if "the failure passed after" in m]) == 1, said


def test_the_messages_handled_are_counted_by_method_and_the_casts_sent_too(transport, topic):
    from tests.unit.telemetry.scrape import value

    def handled(method):
        return value("berth_rpc_messages_total", topic=topic, method=method)

    work = Work()
    endpoint = Endpoint(work)
    client = rpc.RPCClient(transport, rpc.Target(topic))
    server = serve(transport, topic, endpoint, work, batch_size=8)
    for n in range(4):
        client.cast({}, "record", n=n)
    client.cast({}, "refuse", n=9)
    endpoint.go.set()
    try:
        assert endpoint.wait_for(4)
        assert client.call({}, "echo", n=99)["args"] == {"n": 99}
    finally:
        server.stop()
        server.wait()
    assert (handled("record"), handled("refuse"), handled("echo")) == (4, 1, 1)
    casts = {method: value("berth_rpc_casts_total", topic=topic, method=method)
             for method in ("record", "refuse", "echo")}
    assert casts == {"record": 4, "refuse": 1, "echo": 0}
