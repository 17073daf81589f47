"""reno's ``release-notes`` directive, and the notes read straight from releasenotes/notes where
reno cannot read them from git: reno finds each note through the repository's history, which an
exported tree (no ``.git``) or a shallow clone does not hold whole. The docs then still build,
every note listed once under "Unreleased", in the order of their file names."""

import pathlib

import yaml
from docutils import nodes, statemachine
from reno import sphinxext
from sphinx.util import logging
from sphinx.util.nodes import nested_parse_with_titles

LOG = logging.getLogger(__name__)
NOTES = pathlib.Path(__file__).resolve().parents[3] / "releasenotes" / "notes"

#: reno's sections, in its order, with its titles.
SECTIONS = (
    ("prelude", "Prelude"), ("features", "New Features"), ("issues", "Known Issues"),
    ("upgrade", "Upgrade Notes"), ("deprecations", "Deprecation Notes"),
    ("critical", "Critical Issues"), ("security", "Security Issues"), ("fixes", "Bug Fixes"),
    ("other", "Other Notes"),
)


def notes_as_rst(directory: pathlib.Path = NOTES) -> list[str]:
    """The notes of ``directory`` as reStructuredText lines, grouped by reno's sections."""
    notes = [yaml.safe_load(path.read_text()) or {} for path in sorted(directory.glob("*.yaml"))]
    lines = ["Unreleased", "=" * len("Unreleased"), ""]
    for key, title in SECTIONS:
        entries = [entry for note in notes for entry in _entries(note.get(key))]
        if not entries:
            continue
        lines += [title, "-" * len(title), ""]
        for entry in entries:
            if key == "prelude":
                lines += [*entry.strip().splitlines(), ""]
            else:
                first, *rest = entry.strip().splitlines()
                lines += [f"- {first}", *(f"  {line}" for line in rest), ""]
    return lines


def _entries(value):
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


class ReleaseNotes(sphinxext.ReleaseNotesDirective):
    def run(self):
        try:
            return super().run()
        except Exception as exc:  # reno's scan of git: what it raises depends on what git lacks
            LOG.info("release notes read from %s: reno cannot scan this tree's git history (%r)",
                     NOTES, exc)
        result = statemachine.ViewList()
        for number, line in enumerate(notes_as_rst(), 1):
            result.append(line, str(NOTES), number)
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, result, node)
        return node.children


def setup(app):
    app.setup_extension("reno.sphinxext")
    app.add_directive("release-notes", ReleaseNotes, override=True)
    return {"parallel_read_safe": True}
