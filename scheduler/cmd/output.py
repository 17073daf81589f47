"""How listings and single records print: aligned columns, or any format of the openstack client.

Without ``-f``, a listing prints as aligned columns under a header line
(what scripts have read since Berth's first version). ``-f table|json|
value|yaml|csv`` hands the rows to cliff's formatters, the ones the
openstack client uses, so the output is byte for byte what an OpenStack
operator's tools already parse; ``-c COLUMN`` (repeatable, any case,
spaces or underscores) keeps only those columns, in the order given (the openstack
client keeps the listing's order; a script reads them as it asked for them here).
A column the listing does not have is refused, naming the ones it has.
A ``show`` command prints one record (:func:`emit_one`): ``-f json`` and
``-f yaml`` give one object, its lists and objects kept whole; the other
formats print those as JSON text.
"""

import functools
import json
import os
import sys

import stevedore

from scheduler.cmd.arguments import CommandError

NAMESPACE = "cliff.formatter.list"


class UnknownColumn(CommandError):
    """A ``-c`` the listing does not have: refused as any other bad input of a command."""


@functools.cache
def formatters():
    """{name: formatter} of cliff's list formatters (csv, json, table, value, yaml)."""
    manager = stevedore.ExtensionManager(NAMESPACE, invoke_on_load=True)
    return {ext.name: ext.obj for ext in manager}


def add_options(parser):
    group = parser.add_argument_group("output formatters")
    group.add_argument("-f", "--format", dest="output_format", choices=sorted(formatters()),
                       help="print as the openstack client does in this format (default: a listing "
                       "in aligned columns under a header line, one record as a table of fields and values)")
    group.add_argument("-c", "--column", dest="columns", action="append", default=[], metavar="COLUMN",
                       help="only this column (repeat for several), e.g. -c uuid -c state")
    for formatter in formatters().values():
        formatter.add_argument_group(parser)


def _key(name):
    return name.lower().strip().replace(" ", "_")


def select(headers, rows, wanted):
    """``headers`` and ``rows`` cut to the columns ``wanted`` names, in its order, each once
    (all when none)."""
    if not wanted:
        return list(headers), [list(row) for row in rows]
    known = {_key(h): i for i, h in enumerate(headers)}
    unknown = [c for c in wanted if _key(c) not in known]
    if unknown:
        raise UnknownColumn(f"no column {', '.join(repr(c) for c in unknown)}; this listing has "
                            f"{', '.join(_key(h) for h in headers)}")
    keep = list(dict.fromkeys(known[_key(c)] for c in wanted))
    return [headers[i] for i in keep], [[row[i] for i in keep] for row in rows]


def emit(args, headers, rows, out):
    """Print ``rows`` under ``headers`` as ``args`` (-f, -c and the formatters' options) ask."""
    headers, rows = select(headers, rows, getattr(args, "columns", None) or [])
    name = getattr(args, "output_format", None)
    if name is None:
        print_columns(headers, rows, out)
    else:
        formatters()[name].emit_list(headers, rows, out, args)


def wants_format(args):
    """Whether ``args`` ask for a format (-f) or for columns (-c), rather than the command's own lines."""
    return getattr(args, "output_format", None) is not None or bool(getattr(args, "columns", None))


def emit_one(args, record, out, text=None):
    """Print ``record`` ({field: value}, in order) as one object, as ``args`` (-f, -c) ask (a table of
    fields and values without -f). ``text``: {field: function} giving the text of a list or object
    field in the formats that print text (table, value, shell, csv) rather than its JSON."""
    headers, [values] = select(list(record), [list(record.values())], getattr(args, "columns", None) or [])
    name = getattr(args, "output_format", None) or "table"
    formatter = formatters()[name]
    if name not in ("json", "yaml"):
        text = text or {}
        values = [text[h](v) if h in text and v is not None else
                  json.dumps(v, sort_keys=True) if isinstance(v, dict | list) else v
                  for h, v in zip(headers, values, strict=True)]
    if hasattr(formatter, "emit_one"):
        formatter.emit_one(headers, values, out, args)
    else:  # csv: one row under its header
        formatter.emit_list(headers, [values], out, args)


def print_columns(headers, rows, out):
    """Aligned columns under a header line; a missing value shows as ``-``."""
    rows = [["-" if c in (None, "") else str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    for row in [headers] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)


def quiet_stdout():
    """After a broken pipe, point stdout at /dev/null so that the interpreter's last
    flush finds nothing to complain about."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
