"""The documentation's pages (README.md and doc/source), for the tests that check what they show."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "doc" / "source"


def page(path: str) -> str:
    """The text of one page of doc/source, e.g. ``admin/metrics.md``."""
    return (DOCS / path).read_text()


def pages() -> list[pathlib.Path]:
    """README.md and every Markdown page of doc/source."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def blocks(lang: str, text: str) -> list[str]:
    """The fenced code blocks of ``lang`` in a page's text."""
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)
