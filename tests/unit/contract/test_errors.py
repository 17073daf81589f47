"""The contract's error is scheduler.exception's, by identity and by the name a reply gives it."""

import json

import pytest

from berth_contract import errors, request_spec
from scheduler import exception
from scheduler.rpc import envelope


def test_the_contracts_errors_are_the_schedulers():
    assert exception.InvalidRequest is errors.InvalidRequest
    assert exception.BerthError is errors.BerthError
    assert issubclass(exception.NoValidHost, errors.BerthError)


def test_a_refusal_by_a_contract_check_names_the_same_class_on_the_wire():
    with pytest.raises(exception.InvalidRequest) as refused:
        request_spec.RequestSpec.from_wire({"instance_type": "not an object"}, {})
    failure = json.loads(envelope.serialize_failure(refused.value))
    assert (failure["module"], failure["class"]) == ("scheduler.exception", "InvalidRequest")
