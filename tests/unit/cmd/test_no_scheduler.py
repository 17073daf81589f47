"""With no scheduler consuming its queue, a command that asks the scheduler says so at once."""

from scheduler.rpc.transport import Transport
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
