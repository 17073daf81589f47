"""A server that handles waiting messages in batches, inside one unit of work."""

import contextlib
import threading

from scheduler import rpc
from tests.unit.rpc.conftest import WAIT, Recorder


class Work:
    """A unit of work that records what happened and can be told to fail its commits."""

    def __init__(self, failures=0):
        self.failures = failures
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
            if self.failures:
                self.failures -= 1
                raise RuntimeError("the database went away")
            self.commits.append(self.current)
        return False

    @contextlib.contextmanager
    def step(self, method):
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
    work = Work(failures=1)
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
