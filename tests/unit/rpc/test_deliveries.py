"""Counting, on disk, the messages a worker was handling when it stopped."""

from scheduler.rpc import deliveries


class Message:
    def __init__(self, body):
        self.body = body


def test_a_message_settled_is_forgotten_and_one_left_behind_counts_up(tmp_path):
    path = str(tmp_path / "deliveries" / "scheduler.s1.json")
    poison, fine = deliveries.fingerprint(Message(b"poison")), deliveries.fingerprint(Message(b"fine"))
    assert deliveries.DeliveryLog(path).begin(fine) == 0
    deliveries.DeliveryLog(path).end(fine)
    for stopped in range(3):  # a new process each time: the count is on disk
        assert deliveries.DeliveryLog(path).begin(poison) == stopped
    assert deliveries.DeliveryLog(path).begin(fine) == 0


def test_an_unreadable_count_file_starts_again(tmp_path, caplog):
    path = tmp_path / "deliveries.json"
    path.write_text("{broken")
    assert deliveries.DeliveryLog(str(path)).begin("k") == 0
    assert "unreadable" in caplog.text
