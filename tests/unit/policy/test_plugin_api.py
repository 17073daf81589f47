"""The plugin API as a third party uses it.

tests/plugin_fixture is a distribution of its own (berth-example-plugin): a
filter and a weigher under the entry points berth.scheduler.filters /
berth.scheduler.weighers, each with an option. pip installs it into a
temporary directory, and Berth runs with it in a subprocess (PYTHONPATH), so
that the rest of the session and the checked-in sample config never see it.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from scheduler.policy import filters, plugins, weighers
from scheduler.policy.filters import BaseHostFilter
from scheduler.policy.filters.resources import RamFilter

ROOT = pathlib.Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "plugin_fixture"


def pip_install(source, target):
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
         "--quiet", "--disable-pip-version-check", "--target", str(target), str(source)],
        check=True, capture_output=True, text=True,
    )
    return target


def install_variant(tmp, name, entry_points, modules):
    """Install a distribution ``name`` made of ``modules`` ({path: source}) with ``entry_points``
    ({group: {name: value}}), built by the fixture's backend."""
    source = tmp / f"{name}-src"
    source.mkdir()
    shutil.copy(FIXTURE / "build_backend.py", source)
    groups = "".join(
        f'\n[project.entry-points."{group}"]\n' + "".join(f'{k} = "{v}"\n' for k, v in eps.items())
        for group, eps in entry_points.items()
    )
    (source / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "build_backend"\nbackend-path = ["."]\n\n'
        f'[project]\nname = "{name}"\nversion = "1.0"\n{groups}'
    )
    for path, text in modules.items():
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        (source / path).write_text(textwrap.dedent(text))
    return pip_install(source, tmp / f"{name}-site")


@pytest.fixture(scope="module")
def example_plugin(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("example_plugin")
    # A copy: building in place would leave __pycache__ in the checkout.
    source = shutil.copytree(FIXTURE, tmp / "src", ignore=shutil.ignore_patterns("__pycache__"))
    return pip_install(source, tmp / "site")


@pytest.fixture(scope="module")
def unusable_plugins(tmp_path_factory):
    """berth-unusable-plugin: one entry point names a class that is no filter, one fails to import."""
    return install_variant(
        tmp_path_factory.mktemp("unusable"), "berth-unusable-plugin",
        {"berth.scheduler.filters": {"NotAFilter": "berth_unusable:NotAFilter",
                                     "BrokenFilter": "berth_unusable.broken:BrokenFilter"}},
        {"berth_unusable/__init__.py": """
             class NotAFilter:
                 def host_passes(self, host_state, spec):
                     return True
             """,
         "berth_unusable/broken.py": "import a_module_nobody_installed\n"},
    )


@pytest.fixture(scope="module")
def clashing_plugin(tmp_path_factory):
    """berth-clashing-plugin: a RamFilter of its own, which Berth already has."""
    return install_variant(
        tmp_path_factory.mktemp("clashing"), "berth-clashing-plugin",
        {"berth.scheduler.filters": {"ram": "berth_clashing:RamFilter"}},
        {"berth_clashing/__init__.py": """
             from scheduler.policy import filters

             class RamFilter(filters.BaseHostFilter):
                 def host_passes(self, host_state, spec):
                     return True
             """},
    )


def run(site, code, *args):
    """Run ``code`` in a fresh interpreter that sees the distribution installed in ``site``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


PLACE = """
    import json, sys
    from scheduler.process import startup as config
    from scheduler.policy import filters
    from scheduler.policy import weighers
    from scheduler.cmd import common
    from scheduler.exception import NoValidHost
    from scheduler.policy.host_state import HostTable
    from berth_contract.request_spec import RequestSpec
    from scheduler.policy.selection import Selector

    def place(path):
        '''Where a 1024 MB instance goes on hosts with 4096 and 1536 MB free, configured by ``path``.'''
        try:
            conf = config.load(["--config-file", path], "berth-scheduler", **common.SCHEDULER_SETUP)
        except SystemExit as exc:
            return {"exit": str(exc)}
        table = HostTable()
        for name, free in (("roomy", 4096), ("snug", 1536)):
            table.view(table.add(name)).update_from_report({
                "host": name, "memory_mb": 8192, "free_ram_mb": free, "local_gb": 100,
                "free_disk_gb": 100, "vcpus": 8, "vcpus_used": 0, "instance_uuids": [], "running_vms": 0})
        spec = RequestSpec.from_wire(
            {"num_instances": 1, "instance_type": {"memory_mb": 1024, "root_gb": 1, "vcpus": 1}}, {})
        selector = Selector(filters.enabled_filters(conf), weighers.enabled_weighers(conf), 1)
        try:
            host = selector.select(table, spec)[0].host
        except NoValidHost as exc:
            host = str(exc)
        return {"host": host, "reserved_ram_mb": conf.example_plugin.reserved_ram_mb,
                "stacking_weight_multiplier": conf.example_plugin.stacking_weight_multiplier}

    print(json.dumps([place(path) for path in sys.argv[1:]]))
"""


START = """
    import json, sys
    from scheduler.process import startup as config
    from scheduler.cmd import common

    def start(path):
        try:
            config.load(["--config-file", path], "berth-scheduler", **common.SCHEDULER_SETUP)
        except SystemExit as exc:
            return str(exc)
        return "started"

    print(json.dumps([start(path) for path in sys.argv[1:]]))
"""


AGENT_START = """
    import sys
    from compute_agent import conf as agent_conf
    from scheduler import conf as berth_conf
    from scheduler.process import startup as config

    config.load(["--config-file", sys.argv[1]], "berth-compute-agent", register=[agent_conf.register_opts],
                areas=berth_conf.AGENT_AREAS)
    print(*config._UNKNOWN, sep="\\n")
"""


def write_conf(tmp_path, name, text):
    path = tmp_path / f"{name}.conf"
    path.write_text(text)
    return str(path)


def test_an_installed_plugin_is_known_by_its_class_name(example_plugin):
    found = json.loads(run(example_plugin, """
        import json
        from scheduler.policy import filters
        from scheduler.policy import weighers
        print(json.dumps({"filters": {n: c.__module__ for n, c in filters.all_filters().items()},
                          "weighers": {n: c.__module__ for n, c in weighers.all_weighers().items()}}))
    """))
    assert found["filters"]["ReservedRamFilter"] == "berth_example_plugin.reserved_ram"
    assert found["weighers"]["StackingWeigher"] == "berth_example_plugin.stacking"
    # The entry point's own name is not a plugin name; Berth's plugins are all still there.
    assert "reserved_ram" not in found["filters"] and "stacking" not in found["weighers"]
    assert found["filters"]["RamFilter"] == "scheduler.policy.filters.resources"


def test_an_installed_plugin_places_as_its_options_say(example_plugin, tmp_path):
    enabled = "[filter_scheduler]\nenabled_filters = ReservedRamFilter\nweighers = StackingWeigher\n"
    defaults, reserve_more, reserve_all, spread, by_entry_point_name = json.loads(run(
        example_plugin, PLACE,
        write_conf(tmp_path, "defaults", enabled),
        write_conf(tmp_path, "reserve_more", enabled + "[example_plugin]\nreserved_ram_mb = 1024\n"),
        write_conf(tmp_path, "reserve_all", enabled + "[example_plugin]\nreserved_ram_mb = 4000\n"),
        write_conf(tmp_path, "spread", enabled + "[example_plugin]\nstacking_weight_multiplier = -1\n"),
        write_conf(tmp_path, "by_entry_point_name", "[filter_scheduler]\nenabled_filters = reserved_ram\n"),
    ))
    # Defaults: snug keeps 512 MB free, enough; the weigher stacks onto it.
    assert defaults == {"host": "snug", "reserved_ram_mb": 512, "stacking_weight_multiplier": 1.0}
    assert reserve_more["host"] == "roomy" and reserve_more["reserved_ram_mb"] == 1024
    assert "ReservedRamFilter" in reserve_all["host"] and reserve_all["host"].startswith("No valid host")
    assert spread == {"host": "roomy", "reserved_ram_mb": 512, "stacking_weight_multiplier": -1.0}
    assert "unknown filter 'reserved_ram'" in by_entry_point_name["exit"]


def test_the_config_generator_lists_an_installed_plugins_options(example_plugin):
    sample = run(example_plugin, "import sys; from oslo_config.generator import main; sys.exit(main())",
                 "--namespace", "berth.scheduler")
    section = sample.split("[example_plugin]", 1)[1]
    assert "#reserved_ram_mb = 512" in section
    assert "#stacking_weight_multiplier = 1.0" in section
    assert "[filter_scheduler]" in sample  # Berth's own options are still there


def test_a_plugin_that_cannot_be_used_fails_only_the_scheduler_that_enables_it(unusable_plugins, tmp_path):
    unrelated, not_a_filter, broken = json.loads(run(
        unusable_plugins, START,
        write_conf(tmp_path, "unrelated", "[filter_scheduler]\nenabled_filters = RamFilter\n"),
        write_conf(tmp_path, "not_a_filter", "[filter_scheduler]\nenabled_filters = RamFilter,NotAFilter\n"),
        write_conf(tmp_path, "broken", "[filter_scheduler]\nenabled_filters = BrokenFilter\n"),
    ))
    assert unrelated == "started"
    assert not_a_filter == (
        "berth-scheduler: invalid configuration: [filter_scheduler] enabled_filters: filter NotAFilter: "
        "entry point 'NotAFilter = berth_unusable:NotAFilter' (berth.scheduler.filters) of distribution "
        "berth-unusable-plugin 1.0 cannot be used: <class 'berth_unusable.NotAFilter'> is not a subclass "
        "of scheduler.policy.filters.BaseHostFilter"
    )
    assert broken == (
        "berth-scheduler: invalid configuration: [filter_scheduler] enabled_filters: filter BrokenFilter: "
        "entry point 'BrokenFilter = berth_unusable.broken:BrokenFilter' (berth.scheduler.filters) of "
        "distribution berth-unusable-plugin 1.0 cannot be used: it fails to import: ModuleNotFoundError: "
        "No module named 'a_module_nobody_installed'"
    )


def test_a_plugin_named_as_a_builtin_one_stops_start_up_naming_both(clashing_plugin, tmp_path):
    conf = write_conf(tmp_path, "any", "[filter_scheduler]\nenabled_filters = RamFilter\n")
    [result] = json.loads(run(clashing_plugin, START, conf))
    assert result == (
        "berth-scheduler: invalid configuration: two filters are named RamFilter: "
        "scheduler.policy.filters.resources.RamFilter (built in) "
        "and entry point 'ram = berth_clashing:RamFilter' "
        "(berth.scheduler.filters) of distribution berth-clashing-plugin 1.0; uninstall one of them"
    )


# Discovery on its own, with entry points made up in this process.


def _with_entry_points(monkeypatch, **targets):
    """Entry points in berth.scheduler.filters: {entry point name: the object it loads}."""
    eps = [SimpleNamespace(name=name, value=f"somewhere:{name}", group=filters.ENTRY_POINTS, attr=name,
                           dist=None, load=lambda target=target: target)
           for name, target in targets.items()]
    monkeypatch.setattr(plugins, "entry_points", lambda group: [ep for ep in eps if ep.group == group])


def _filter_named(name):
    return type(name, (BaseHostFilter,), {"__module__": "elsewhere", "host_passes": lambda s, h, r: True})


def test_two_entry_points_of_one_class_name_are_refused(monkeypatch):
    _with_entry_points(monkeypatch, first=_filter_named("MyFilter"), second=_filter_named("MyFilter"))
    with pytest.raises(plugins.PluginError, match=r"two filters are named MyFilter: entry point 'first = "
                       r".*' \(berth.scheduler.filters\) and entry point 'second = "):
        filters.all_filters()


def test_one_class_under_two_entry_points_is_one_plugin(monkeypatch):
    mine = _filter_named("MyFilter")
    _with_entry_points(monkeypatch, first=mine, second=mine)
    assert filters.all_filters()["MyFilter"] is mine


@pytest.mark.parametrize("failure", [
    ModuleNotFoundError("No module named 'scheduler.filters'", name="scheduler.filters"),
    ImportError("cannot import name 'filters' from 'scheduler' (/srv/berth/scheduler/__init__.py)"),
])
def test_a_plugin_importing_the_base_classes_old_place_is_told_the_new_one(monkeypatch, caplog, failure):
    def load():
        raise failure

    eps = [SimpleNamespace(name="OldFilter", value="old_plugin:OldFilter", group=filters.ENTRY_POINTS,
                           attr="OldFilter", dist=None, load=load)]
    monkeypatch.setattr(plugins, "entry_points", lambda group: [ep for ep in eps if ep.group == group])
    monkeypatch.setattr(plugins, "_warned", set())
    with caplog.at_level("WARNING", logger=plugins.__name__):
        catalog = plugins.discover(filters, BaseHostFilter, filters.ENTRY_POINTS)
    assert catalog.unusable["OldFilter"].reason.endswith(
        "(scheduler.filters is now scheduler.policy.filters: import the base class from there)")
    assert "scheduler.policy.filters: import the base class from there" in caplog.text


def test_builtin_plugins_are_the_concrete_classes_of_the_package():
    found = filters.all_filters()
    assert found["RamFilter"] is RamFilter
    # Shared bases (a leading underscore, or abstract = True) are not plugins.
    assert not any(name.startswith("_") for name in found)
    assert "BaseHostFilter" not in found and "BaseHostWeigher" not in weighers.all_weighers()


def test_an_agent_sharing_a_file_knows_an_installed_plugins_options_and_names_a_misspelt_one(
        example_plugin, tmp_path):
    """Berth's table of names cannot list another distribution's: with one installed, a name the
    table lacks is looked up in the declarations, the plugin's included."""
    path = write_conf(tmp_path, "shared", "[compute_agent]\ndriver = fake\n[example_plugin]\n"
                      "reserved_ram_mb = 1024\nstacking_weight_multiplier = 2\nreserved_ram_bm = 1\n")
    assert run(example_plugin, AGENT_START, path).splitlines() == [
        f"{path}: unknown option [example_plugin] reserved_ram_bm, ignored: "
        "did you mean [example_plugin] reserved_ram_mb?"]
