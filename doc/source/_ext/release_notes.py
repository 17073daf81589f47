"""reno's ``release-notes`` directive, and the notes read straight from releasenotes/notes where
reno cannot read them from git: reno finds each note through the repository's history, which an
exported tree (no ``.git``) or a shallow clone does not hold whole. The docs then still build,
every note listed once under "Unreleased", in the order of their file names."""

from docutils import nodes, statemachine
from release_notes_text import NOTES, notes_as_rst
from reno import sphinxext
from sphinx.util import logging
from sphinx.util.nodes import nested_parse_with_titles

LOG = logging.getLogger(__name__)


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
