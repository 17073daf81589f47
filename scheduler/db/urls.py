"""The database URL as operators write it: libpq's list of hosts, and what of it may be logged."""

import re
import urllib.parse

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, make_url

from scheduler.utils.masking import mask_url

# scheme://[user[:password]@]host[:port],host[:port][/database][?query]: libpq's form of several
# servers, which SQLAlchemy reads as one host with a bad port.
_HOST_LIST = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<user>[^/?#]*@)?"
                        r"(?P<hosts>[^/?#@]*,[^/?#@]*)(?P<database>/[^?#]*)?(?:\?(?P<query>.*))?$")


def _hosts_as_query(text: str) -> str:
    """``text`` with libpq's host list moved into ``host=`` query arguments, SQLAlchemy's form
    of several PostgreSQL servers; any other URL as it is."""
    match = _HOST_LIST.match(text)
    if match is None:
        return text
    if not match["scheme"].startswith("postgresql"):
        raise ValueError(f"invalid database URL {mask_url(text)!r}: several hosts are for PostgreSQL only")
    hosts = match["hosts"].split(",")
    if not all(hosts):
        raise ValueError(f"invalid database URL {mask_url(text)!r}: an empty host in its list")
    query = "&".join([*(f"host={host}" for host in hosts), *([match["query"]] if match["query"] else [])])
    return f"{match['scheme']}://{match['user'] or ''}{match['database'] or '/'}?{query}"


def parse(url: str | URL) -> URL:
    """The SQLAlchemy URL of ``url``; a ValueError, password masked, for one that is not."""
    try:
        return make_url(_hosts_as_query(url) if isinstance(url, str) else url)
    except (sa_exc.ArgumentError, ValueError) as exc:
        if str(exc).startswith("invalid database URL"):
            raise
        raise ValueError(f"invalid database URL {mask_url(url)!r}: {exc}") from None


def masked(url: URL) -> str:
    """``url`` as Berth logs it: the password of its user, or given as a query argument, as ***."""
    if "password" in url.query:
        url = url.update_query_dict({"password": "***"})
    text, mark, query = url.render_as_string(hide_password=True).partition("?")
    return text + mark + urllib.parse.unquote(query)


def password(url: URL) -> str | None:
    """The password ``url`` gives, in its user part or as a query argument."""
    given = url.password or url.query.get("password")
    return given if isinstance(given, str) and given else None
