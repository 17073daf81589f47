"""The argparse tree of the commands asked for, in the grammar's words.

Each command module declares its parsers as it was written (``subparsers.add_parser("boot")``);
``build`` hands it a stand-in for ``subparsers`` that puts each parser of a route where the
grammar says (``server`` -> ``create``) and each group it declares onto the grammar's own group,
and lets whatever else the module declares go nowhere. Only the routes' modules are imported.
"""

import argparse
import importlib

from scheduler.cmd import grammar


class _Tree:
    def __init__(self, top):
        self.groups = {(): top}
        self.parsers = {}

    def group(self, words):
        """The sub-parsers of group ``words``, made (with the groups above it) on first use."""
        if words not in self.groups:
            above = self.group(words[:-1])
            parser = above.add_parser(words[-1], help=grammar.GROUPS.get(words))
            found = parser.add_subparsers(dest="_".join(words).replace("-", "_") + "_action",
                                          metavar="ACTION")
            found.required = True
            self.parsers[words] = parser
            self.groups[words] = found
        return self.groups[words]


class _Declared:
    """``subparsers`` as a command module sees it, ``at`` the words it has declared down to."""

    def __init__(self, tree, routes, at=()):
        self._tree, self._routes, self._at = tree, routes, at

    def add_parser(self, name, **kwargs):
        built = self._at + (name,)
        words = _placed(self._routes, built)
        if words is None:
            if any(route.built[:len(built)] == built for route in self._routes):
                return _Passing(_Declared(self._tree, self._routes, built))
            return argparse.ArgumentParser(add_help=False)  # declared, not asked for
        if words in grammar.GROUPS:
            self._tree.group(words)
            parser = self._tree.parsers[words]
            if kwargs.get("description"):
                parser.description = kwargs["description"]
                parser.formatter_class = kwargs.get("formatter_class", parser.formatter_class)
            return _Passing(self._tree.groups[words], parser)
        return self._tree.group(words[:-1]).add_parser(words[-1], **kwargs)


class _Passing:
    """A parser a module declares as a group: its actions go where ``actions`` puts them."""

    def __init__(self, actions, parser=None):
        self._actions = actions
        self._parser = parser or argparse.ArgumentParser(add_help=False)
        self.required = True

    def add_subparsers(self, **_):
        return self._actions

    def __getattr__(self, name):
        return getattr(self._parser, name)


def _placed(routes, built):
    """Where the parser a module declares as ``built`` goes, or None."""
    for route in routes:
        if built[:len(route.built)] == route.built:
            return route.words + built[len(route.built):]
    return None


def build(top, routes):
    """Declare ``routes``' parsers under ``top`` (the sub-parsers of ``berth``), each module's
    adder called once; returns the tree: ``groups`` ({words: sub-parsers}, ``()`` for
    ``top``) and ``parsers`` ({words: a group's parser})."""
    tree = _Tree(top)
    adders = {}
    for route in routes:
        adders.setdefault((route.module, route.adder), []).append(route)
    for (module, adder), asked in adders.items():
        getattr(importlib.import_module(module), adder)(_Declared(tree, asked))
    for words, found in tree.groups.items():
        _in_grammar_order(found, words)
    return tree


def _in_grammar_order(found, group):
    """List a group's commands in the order ROUTES names them (a module's own actions after,
    as it declared them)."""
    order = []
    for route in grammar.ROUTES:
        for end in range(1, len(route.words) + 1):
            order.append(route.words[:end])
    rank = {words: index for index, words in reversed(list(enumerate(order)))}
    listed = getattr(found, "_choices_actions", None)  # argparse's help entries, since Python 3.2
    if listed is not None:
        listed.sort(key=lambda action: rank.get(group + (action.dest,), len(order)))
