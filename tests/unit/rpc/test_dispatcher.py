"""Arguments are checked against the endpoint method's signature before it runs."""

import pytest

from scheduler.rpc.dispatcher import Dispatcher
from scheduler.rpc.exceptions import InvalidArguments


class Endpoint:
    def place(self, context, host, node=None):
        return ("place", host, node)

    def tag(self, context, *, name):
        return ("tag", name)

    def anything(self, context, **kwargs):
        return ("anything", kwargs)


@pytest.mark.parametrize(
    ("method", "args", "error"),
    [
        ("place", {"host": "h"}, None),
        ("place", {"host": "h", "node": "n"}, None),
        ("place", {}, "place: missing a required argument: 'host'"),
        ("place", {"node": "n"}, "place: missing a required argument: 'host'"),
        ("place", {"host": "h", "color": 1}, "place: got an unexpected keyword argument 'color'"),
        ("place", {"host": "h", "context": {}}, "place: multiple values for argument 'context'"),
        ("tag", {"name": "x"}, None),
        ("tag", {}, "tag: missing a required argument: 'name'"),
        ("tag", {"name": "x", "other": 1}, "tag: got an unexpected keyword argument 'other'"),
        ("anything", {"a": 1, "b": 2}, None),
    ],
)
def test_arguments_that_do_not_fit_are_refused_naming_the_misfit(method, args, error):
    dispatcher = Dispatcher([Endpoint()])
    for _ in range(2):  # the first check learns the signature; the second uses what it learnt
        if error is None:
            assert dispatcher.dispatch({}, method, args)[0] == method
        else:
            with pytest.raises(InvalidArguments) as info:
                dispatcher.dispatch({}, method, args)
            assert str(info.value) == error
