"""Sphinx configuration of Berth's documentation (``tox -e docs``)."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent / "_ext"))

project = "Berth"
copyright = "Berth contributors"
author = "Berth contributors"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "oslo_config.sphinxext",
    "release_notes",  # reno's, or the notes read directly where git cannot give them
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns: list[str] = []

# Links to a heading of another page (page.md#heading) resolve as GitHub renders them.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
# oslo.config's domain cannot resolve a link it does not know: look up Markdown links in these only.
myst_ref_domains = ["std", "py"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"

html_theme = "alabaster"
html_title = "Berth"
