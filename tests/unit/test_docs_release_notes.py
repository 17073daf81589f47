"""The release notes as the docs render them where reno cannot read git (an exported tree, a
shallow clone): every entry of every note, under reno's section titles."""

import importlib.util
import pathlib

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load_extension():
    path = ROOT / "doc/source/_ext/release_notes_text.py"  # yaml only: the unit tests' env has no Sphinx
    spec = importlib.util.spec_from_file_location("release_notes_text", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_entry_of_every_note_is_rendered_under_its_section(tmp_path):
    extension = load_extension()
    (tmp_path / "a-1.yaml").write_text(
        "---\nfeatures:\n  - |\n    Plans\n    are saved.\nupgrade:\n  - Run db sync.\n")
    (tmp_path / "b-2.yaml").write_text("---\nprelude: >\n    A first word.\nfeatures:\n  - Moves.\n")
    assert extension.notes_as_rst(tmp_path) == [
        "Unreleased", "==========", "",
        "Prelude", "-------", "", "A first word.", "",
        "New Features", "------------", "", "- Plans", "  are saved.", "", "- Moves.", "",
        "Upgrade Notes", "-------------", "", "- Run db sync.", "",
    ]


def test_the_project_notes_all_render():
    extension = load_extension()
    rendered = "\n".join(extension.notes_as_rst())
    notes = sorted((ROOT / "releasenotes/notes").glob("*.yaml"))
    assert notes
    for path in notes:
        for entries in yaml.safe_load(path.read_text()).values():
            for entry in [entries] if isinstance(entries, str) else entries:
                assert entry.strip().splitlines()[0] in rendered, path.name
