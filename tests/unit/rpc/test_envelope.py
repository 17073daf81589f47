"""Our envelope is oslo.messaging's: what we write reads back in oslo as what it
would have written (keys in the same order; JSON spacing aside), and we read
what it writes."""

import json
import os
import sys

import pytest
from oslo_messaging._drivers import common as oslo_common

from scheduler.rpc import envelope


def test_request_envelope_equals_oslo_serialize_msg():
    msg = envelope.request(
        "run_instance",
        {"request_spec": {"num_instances": 2}, "filter_properties": {}},
        {"user_id": "u1", "project_id": "p1"},
        msg_id="abc",
        reply_q="reply_x",
    )

    ours, theirs = envelope.wrap(msg), oslo_common.serialize_msg(msg)
    assert list(ours) == list(theirs) and ours["oslo.version"] == theirs["oslo.version"]
    assert oslo_common.deserialize_msg(ours) == oslo_common.deserialize_msg(theirs) == msg
    assert list(json.loads(ours["oslo.message"])) == list(json.loads(theirs["oslo.message"]))
    inner = json.loads(envelope.wrap(msg)["oslo.message"])
    assert inner["method"] == "run_instance"
    assert inner["version"] == "1.0" and inner["namespace"] is None
    assert inner["_context_user_id"] == "u1" and inner["_context_project_id"] == "p1"
    assert inner["_msg_id"] == "abc" and inner["_reply_q"] == "reply_x"
    assert "_timeout" in inner and len(inner["_unique_id"]) == 32


def test_cast_has_no_reply_fields():
    inner = envelope.request("delete_instance", {"instance_uuid": "i"}, {})
    assert not {"_msg_id", "_reply_q", "_timeout"} & set(inner)


def test_we_read_what_oslo_writes():
    raw = {"method": "select_destinations", "args": {"x": 1}, "_context_user": "u", "_msg_id": "m"}
    body = oslo_common.serialize_msg(dict(raw))

    method, args, values, msg_id, reply_q = envelope.parse_request(envelope.unwrap(body))

    assert (method, args, values, msg_id, reply_q) == (
        "select_destinations",
        {"x": 1},
        {"user": "u"},
        "m",
        None,
    )


def test_oslo_reads_what_we_write():
    msg = envelope.request("m", {"a": [1, 2]}, {"k": "v"})
    assert oslo_common.deserialize_msg(envelope.wrap(msg)) == msg


def test_failure_has_oslo_format_and_oslo_rebuilds_it():
    try:
        raise KeyError("missing")
    except KeyError as exc:
        failure = envelope.serialize_failure(exc)

    data = json.loads(failure)
    assert set(data) == {"class", "module", "message", "tb", "args", "kwargs"}
    assert data["class"] == "KeyError" and data["module"] == "builtins"
    rebuilt = oslo_common.deserialize_remote_exception(failure, [])
    assert isinstance(rebuilt, KeyError)


def test_oslo_failure_becomes_remote_error():
    try:
        raise RuntimeError("quota exceeded")
    except RuntimeError:
        failure = oslo_common.serialize_remote_exception(sys.exc_info())

    error = envelope.failure_to_error(failure)

    assert (error.exc_type, error.value) == ("RuntimeError", "quota exceeded")
    assert "Traceback" in error.traceback
    assert str(error) == "RuntimeError: quota exceeded"


def test_unwrap_rejects_what_is_not_an_envelope():
    import pytest

    for body in [
        {"method": "x"},
        "text",
        {"oslo.version": "2.0", "oslo.message": "{bad"},
        {"oslo.version": "3.0", "oslo.message": "{}"},
        {"oslo.version": "2.0", "oslo.message": "[1]"},
    ]:
        with pytest.raises(envelope.InvalidEnvelope):
            envelope.unwrap(body)


class Delivered:
    def __init__(self, body, content_type="application/json", content_encoding="utf-8"):
        self.body, self.content_type, self.content_encoding = body, content_type, content_encoding


@pytest.mark.parametrize("encoding", ["utf-8", "binary", None])
def test_a_json_body_is_read_whatever_encoding_its_publisher_named(encoding):
    inner = json.dumps({"method": "m", "args": {"x": "é"}})
    body = json.dumps({"oslo.version": "2.0", "oslo.message": inner})
    msg = envelope.unwrap(envelope.decode(Delivered(body.encode(), content_encoding=encoding)))
    assert msg["args"] == {"x": "é"}


def test_a_body_of_another_content_type_is_refused():
    with pytest.raises(ValueError, match="content type 'application/x-yaml' is not application/json"):
        envelope.decode(Delivered(b"a: 1", content_type="application/x-yaml"))


def test_message_ids_are_unique_in_a_process_and_in_its_forks():
    ids = [envelope.new_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write_end, envelope.new_id().encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read_end, 64).decode()
    os.close(read_end)
    os.close(write_end)
    assert child[:16] != envelope.new_id()[:16]  # a prefix of its own, not a copy of the counter

