"""The release notes of releasenotes/notes as reStructuredText, read straight from their files
(no git, no Sphinx): what the docs show where reno cannot scan the repository's history."""

import pathlib

import yaml

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
