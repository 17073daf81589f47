"""The request ids Berth gives messages that come without one: req-<uuid4>, as oslo.context's."""

import uuid

from scheduler import rpc
from scheduler.rpc.context import is_request_id


def test_a_new_request_id_is_a_random_version_4_uuid():
    made = [rpc.new_request_id() for _ in range(2000)]
    assert len(set(made)) == len(made)
    for request_id in made:
        assert is_request_id(request_id)
        parsed = uuid.UUID(request_id.removeprefix("req-"))
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
        assert f"req-{parsed}" == request_id
    # Every one of the 122 random bits varies (version and variant bits excepted).
    bits = [uuid.UUID(r.removeprefix("req-")).int for r in made]
    ones = zeros = 0
    for value in bits:
        ones |= value
        zeros |= ~value
    fixed = (0xF << 76) | (0x3 << 62)
    assert (ones & zeros) | fixed == (1 << 128) - 1
