"""With no scheduler consuming its queue, a command that asks the scheduler says so at once."""

from scheduler.rpc import NoQueue
from scheduler.rpc.transport import Publisher, Transport
from tests.unit.cli_scheduler import main, write_conf


def test_a_command_names_the_queue_and_the_broker_when_no_scheduler_consumes(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(Transport, "consumers", lambda self, queue_name, timeout=5.0: 0)
    conf_file = write_conf(tmp_path)
    status, out = main(conf_file, "instances")
    assert (status, out) == (1, "")
    assert capsys.readouterr().err.splitlines()[-1] == (
        "berth: no scheduler is consuming 'scheduler' on memory://: start berth-scheduler "
        "(or berth-all-in-one) on this transport_url")


def test_a_timeout_names_the_broker(tmp_path, capsys):
    conf_file = write_conf(tmp_path)
    text = conf_file.read_text()
    conf_file.write_text(text.replace("rpc_response_timeout = 10", "rpc_response_timeout = 1"))
    status, _ = main(conf_file, "instances")
    assert status == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "berth: the scheduler did not answer within 1 s: is berth-scheduler (or berth-all-in-one) "
        "running on memory://?")


def test_a_boot_no_queue_takes_is_refused_saying_why_and_what_to_do(tmp_path, capsys, monkeypatch):
    """The broker returns a cast no queue takes (RabbitMQ, before any scheduler declared its queue;
    stood for here): no UUID is printed, and the command says what to do."""
    sent = Publisher.publish

    def publish(self, body, exchange, routing_key, *args, mandatory=False, **kwargs):
        if mandatory:
            raise NoQueue(exchange.name, routing_key, "rabbit://guest:***@broker:5672/fresh")
        return sent(self, body, exchange, routing_key, *args, **kwargs)

    monkeypatch.setattr(Publisher, "publish", publish)
    conf_file = write_conf(tmp_path)
    exchange = conf_file.read_text().split("control_exchange = ")[1].split()[0]
    status, out = main(conf_file, "boot", "--flavor-ram", "512", "--flavor-disk", "1", "--flavor-vcpus", "1")
    assert (status, out) == (1, "")
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"berth: no scheduler queue 'scheduler' exists yet on exchange '{exchange}' of "
        "rabbit://guest:***@broker:5672/fresh (no scheduler has run there): the broker dropped the request, "
        "nothing was done. Start berth-scheduler (or berth-all-in-one) on this transport_url and "
        "control_exchange once (it declares the queue, where requests then wait for a scheduler), "
        "and send it again")
