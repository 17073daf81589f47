"""Every ini snippet of the documentation loads as it is pasted: oslo.config takes a trailing
``# ...`` as part of a value, so comments must stand on their own lines."""

import pytest

from compute_agent import conf as agent_conf
from scheduler import conf as berth_conf
from scheduler.conf import opts
from scheduler.process import unknown_config
from tests.docs_pages import DOCS, blocks, pages

SNIPPETS = [snippet for path in pages() for snippet in blocks("ini", path.read_text())]


def test_the_install_and_admin_pages_have_ini_snippets():
    for section in ("install", "admin"):
        assert len([s for p in (DOCS / section).glob("*.md") for s in blocks("ini", p.read_text())]) >= 3


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda s: s.splitlines()[0][:30])
def test_each_ini_snippet_loads_and_every_value_is_taken_whole(tmp_path, snippet):
    path = tmp_path / "snippet.conf"
    path.write_text(snippet)
    conf = berth_conf.new_conf()
    agent_conf.register_opts(conf)
    opts.register_plugin_opts(conf)
    conf(["--config-file", str(path)], project="berth-docs", default_config_files=[])
    assert [str(unknown) for unknown in unknown_config.find(conf)] == []
    section = "DEFAULT"
    for line in snippet.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line.strip("[]")
            continue
        if not line or line.startswith("#"):
            continue
        name, _, value = (part.strip() for part in line.partition("="))
        group = conf if section == "DEFAULT" else getattr(conf, section)
        loaded = getattr(group, name)  # a value the option cannot take raises here
        assert "#" not in str(loaded), (section, name, loaded)
        assert str(loaded) == value or isinstance(loaded, bool | int | float | list | dict), (name, loaded)
