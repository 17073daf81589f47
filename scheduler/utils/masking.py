"""Passwords out of what Berth logs and prints."""

import re

# The password of each user:password@ in a URL, or after a comma in a URL of several
# hosts (amqp://u:p@h1,u:p@h2/); the last "@" of each ends it.
_CREDENTIALS = re.compile(r"(?P<before>(?:[A-Za-z][A-Za-z0-9+.-]*://|,)[^:/@,\s]*:)[^/\s,]*@")
# A password given as a query argument (libpq's ?password=, SQLAlchemy's too), up to the next one.
_QUERY_PASSWORD = re.compile(r"(?P<before>[?&]password=)[^&#\s'\"]*", re.IGNORECASE)


def mask_url(text):
    """``text`` (a URL, or a message that holds some) with every password replaced by ``***``."""
    return _QUERY_PASSWORD.sub(r"\g<before>***", _CREDENTIALS.sub(r"\g<before>***@", str(text)))
