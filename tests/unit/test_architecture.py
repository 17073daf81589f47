"""Berth's layers, read from the code: every module's imports, parsed (``ast``: nothing is
imported), held against the layer each module belongs to (doc/source/contributor/architecture.md).

A layer imports only the layers below it that it names in MAY_IMPORT, and its own. A failure
names each offending import as ``path:line: module (layer) imports target (layer)``.

    python tests/unit/test_architecture.py [ROOT]

prints, for the tree at ROOT (this checkout by default), the imports that break the layers and
how many of Berth's modules importing one filter module loads.
"""

from __future__ import annotations

import ast
import dataclasses
import pathlib
import signal
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

#: Berth's top-level packages (those the tree has).
PACKAGES = ("berth_contract", "scheduler", "compute_agent")

#: Each layer, lowest first, and the modules in it: a module is in the layer of the longest
#: name listed that is the module or one of its packages. ``scheduler`` stands for the package's
#: own ``__init__`` only: a new module directly under it must be given a layer here.
LAYERS = {
    # The wire types and their checks, shared by the scheduler, the agents and the clients.
    "contract": ("berth_contract",),
    # What every part of Berth shares and that imports only the contract.
    "base": ("scheduler", "scheduler.concurrency", "scheduler.exception", "scheduler.version",
             "scheduler.states", "scheduler.migration_states", "scheduler.api_versions"),
    "conf": ("scheduler.conf",),
    "utils": ("scheduler.utils",),
    # Messaging and what watches it.
    "infra": ("scheduler.rpc", "scheduler.telemetry", "scheduler.status_page"),
    # The RPC clients, and what every program does at start and until it stops.
    "shared": ("scheduler.client", "compute_agent.client", "scheduler.process"),
    "db": ("scheduler.db",),
    # Moving instances is one package (scheduler.moves) across three layers: its algorithms
    # are policy, its planner and applier planning, its endpoints, expiry and jobs services.
    "policy": ("scheduler.policy", "scheduler.moves.rebalance", "scheduler.moves.goals"),
    "planning": ("scheduler.planning", "scheduler.moves.planner", "scheduler.moves.applier"),
    "services": ("scheduler.fleet", "scheduler.moves", "scheduler.moves.jobs", "scheduler.admin",
                 "scheduler.scaling", "scheduler.transaction", "scheduler.simulation", "scheduler.manager",
                 "scheduler.service"),
    "agent": ("compute_agent",),
    "agent-cmd": ("compute_agent.cmd",),
    "cmd": ("scheduler.cmd",),
}

_BELOW_INFRA = {"contract", "base", "conf", "utils"}
_SHARED = _BELOW_INFRA | {"infra", "shared"}

#: What each layer may import, besides itself.
MAY_IMPORT = {
    "contract": set(),
    "base": {"contract"},
    "conf": {"contract", "base"},
    "utils": {"contract", "base", "conf"},
    "infra": _BELOW_INFRA,
    "shared": _BELOW_INFRA | {"infra"},
    "db": _BELOW_INFRA | {"infra"},
    # Pure: no database, no broker, no RPC client.
    "policy": _BELOW_INFRA,
    "planning": _SHARED | {"db", "policy"},
    "services": _SHARED | {"db", "policy", "planning"},
    # The agent: the contract and what every service shares, nothing of the scheduler's own.
    "agent": _SHARED,
    "agent-cmd": _SHARED | {"agent"},
    "cmd": _SHARED | {"db", "policy", "planning", "services", "agent"},
}

#: Libraries of I/O that a layer must not load, even through the Berth modules it imports.
IO_LIBRARIES = ("kombu", "amqp", "sqlalchemy", "alembic", "psycopg2", "pymysql", "oslo_messaging")
NO_IO = ("contract", "base", "conf", "policy")

#: Imports in a function's body (run when it is called, not when its module is imported) that
#: reach above their layer, each with the reason it may.
LATE_IMPORTS = {
    ("scheduler.conf.opts", "scheduler.policy"):
        "oslo-config-generator's list of every option asks the installed plugins for theirs",
    ("scheduler.process.unknown_config", "compute_agent.conf"):
        "one file configures every program: a name is unknown only when no program, the agent's "
        "included, has an option of it",
    ("scheduler.process.unknown_config", "compute_agent.cmd.agent"):
        "the commands' own options may be set in a file too: only a name none has is unknown",
    ("scheduler.process.unknown_config", "scheduler.cmd"):
        "the commands' own options may be set in a file too: only a name none has is unknown",
}


@dataclasses.dataclass(frozen=True)
class Import:
    path: str  # the importing file, relative to the root
    line: int
    module: str  # the importing module
    target: str  # the Berth module imported (the longest that exists), or the library's top name
    berth: bool
    late: bool  # in a function's body
    type_only: bool  # under ``if TYPE_CHECKING:``


def modules(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """{dotted name: file} of every Berth module under ``root`` (migrations' scripts left out)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if "migrations" in parts or ".venv" in parts:
                continue
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _resolve(name: str, known: dict) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


class _Reader(ast.NodeVisitor):
    """The imports of one module, each marked when it is in a function or only for type checkers."""

    def __init__(self, module: str, package: str, path: str, known: dict):
        self.module, self.package, self.path, self.known = module, package, path, known
        self.found: list[Import] = []
        self.late = self.type_only = False

    def add(self, name: str, node: ast.stmt) -> None:
        top = name.partition(".")[0]
        berth = top in PACKAGES
        target = _resolve(name, self.known) if berth else top
        if target is not None and target != self.module:
            self.found.append(Import(self.path, node.lineno, self.module, target, berth, self.late,
                                     self.type_only))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            parts = self.package.split(".")
            source = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        for alias in node.names:  # a name of the module, or a submodule of it
            self.add(f"{source}.{alias.name}", node)

    def _inside(self, node: ast.AST, late: bool, type_only: bool) -> None:
        saved = self.late, self.type_only
        self.late, self.type_only = late, type_only
        self.generic_visit(node)
        self.late, self.type_only = saved

    def visit_FunctionDef(self, node: ast.AST) -> None:
        self._inside(node, True, self.type_only)

    visit_AsyncFunctionDef = visit_Lambda = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" not in ast.unparse(node.test):
            self.generic_visit(node)
            return
        for inner in node.body:
            self._inside(ast.Module([inner], []), self.late, True)
        for inner in node.orelse:
            self.visit(inner)


def imports(root: pathlib.Path = ROOT) -> list[Import]:
    """Every import statement of Berth's modules under ``root``: one a line and target
    (``from x import a, b`` of names of x is one)."""
    known = modules(root)
    found: list[Import] = []
    for module, path in known.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        reader = _Reader(module, package, str(path.relative_to(root)), known)
        reader.visit(ast.parse(path.read_text(), str(path)))
        found += reader.found
    return list(dict.fromkeys(found))


def layer_of(module: str) -> str | None:
    best, best_len = None, -1
    for layer, names in LAYERS.items():
        for name in names:
            exact_only = name == "scheduler"
            if module == name or (not exact_only and module.startswith(name + ".")):
                if len(name) > best_len:
                    best, best_len = layer, len(name)
    return best


def breaks(found: list[Import]) -> list[tuple[Import, str, str]]:
    """(import, its module's layer, its target's layer) of every Berth import that runs upward
    (those only for type checkers too: they are the same dependency to a reader)."""
    wrong = []
    for imp in found:
        if not imp.berth:
            continue
        mine, theirs = layer_of(imp.module), layer_of(imp.target)
        if mine is None or theirs is None or mine == theirs or theirs in MAY_IMPORT[mine]:
            continue
        wrong.append((imp, mine, theirs))
    return wrong


def _said(imp: Import, mine: str, theirs: str) -> str:
    when = " (in a function)" if imp.late else " (for type checkers)" if imp.type_only else ""
    allowed = ", ".join(sorted(MAY_IMPORT[mine])) or "nothing of Berth"
    return (f"{imp.path}:{imp.line}: {imp.module} ({mine}) imports {imp.target} ({theirs}){when}; "
            f"{mine} may import {allowed}")


def _late_allowed(imp: Import) -> bool:
    return any(imp.module == module and (imp.target == target or imp.target.startswith(target + "."))
               for module, target in LATE_IMPORTS)


def loaded_at_import(found: list[Import], module: str) -> set[str]:
    """The Berth modules and I/O libraries that importing ``module`` loads, as its module-level
    imports say (a package's ``__init__`` runs before any module of it)."""
    by_module: dict[str, list[Import]] = {}
    for imp in found:
        if not imp.late and not imp.type_only:
            by_module.setdefault(imp.module, []).append(imp)
    seen, todo = set(), [module]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        parts = current.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # its packages
        for imp in by_module.get(current, ()):
            if imp.berth:
                todo.append(imp.target)
            elif imp.target in IO_LIBRARIES:
                seen.add(imp.target)
    return seen - {module}


@pytest.fixture(scope="module")
def found():
    return imports(ROOT)


def test_every_module_has_a_layer():
    unplaced = [name for name in modules(ROOT) if layer_of(name) is None]
    assert not unplaced, f"give these modules a layer in LAYERS: {', '.join(unplaced)}"


def test_each_layer_may_import_what_the_layers_it_imports_may():
    # So that checking each module's own imports checks everything it loads.
    for layer, allowed in MAY_IMPORT.items():
        for lower in allowed:
            assert MAY_IMPORT[lower] <= allowed, f"{layer} may import {lower}, not all that {lower} may"


def test_no_module_imports_above_its_layer(found):
    wrong = [_said(imp, mine, theirs) for imp, mine, theirs in breaks(found) if not imp.late]
    assert not wrong, "imports that break the layers:\n" + "\n".join(wrong)


def test_no_function_imports_above_its_layer_without_a_reason(found):
    wrong = [_said(imp, mine, theirs) for imp, mine, theirs in breaks(found)
             if imp.late and not _late_allowed(imp)]
    assert not wrong, ("imports in functions that break the layers (add one to LATE_IMPORTS only "
                       "with the reason it must):\n" + "\n".join(wrong))


def test_the_reasons_given_for_late_imports_are_still_needed(found):
    used = {(module, target) for module, target in LATE_IMPORTS
            if any(imp.late and _late_allowed(imp) and imp.module == module for imp, _, _ in breaks(found))}
    assert used == set(LATE_IMPORTS), f"no longer needed: {set(LATE_IMPORTS) - used}"


@pytest.mark.parametrize("layer", NO_IO)
def test_pure_layers_load_no_io_library(found, layer):
    wrong = []
    for name in modules(ROOT):
        if layer_of(name) == layer:
            loaded = loaded_at_import(found, name)
            heavy = sorted(lib for lib in loaded if lib in IO_LIBRARIES)
            if heavy:
                wrong.append(f"{name} loads {', '.join(heavy)}")
    assert not wrong, "\n".join(wrong)


def test_the_option_areas_scheduler_conf_names_declare_options():
    # scheduler.conf names the modules beside the code that declare the shared options, and
    # imports them only when the options are registered or listed: none is an import of it.
    known = modules(ROOT)
    tree = ast.parse((ROOT / "scheduler/conf/__init__.py").read_text())
    [areas] = [node.value for node in tree.body if isinstance(node, ast.Assign)
               and any(getattr(target, "id", None) == "AREAS" for target in node.targets)]
    for name in ast.literal_eval(areas):
        assert name in known, f"scheduler.conf.AREAS: no module {name}"
        defined = {node.name for node in ast.parse(known[name].read_text()).body
                   if isinstance(node, ast.FunctionDef)}
        assert "list_opts" in defined, f"scheduler.conf.AREAS: {name} has no list_opts()"


def test_berth_imports_no_deprecated_path():
    # scheduler.policy.deprecated_paths: the old paths of what moved, kept for out-of-tree plugins.
    moved = ("request_spec", "resource_classes", "traits", "image_meta", "rebalance", "rebalance_goals")
    old = tuple(f"scheduler.policy.{name}" for name in moved)
    wrong = []
    for roots in (PACKAGES, ("tests", "benchmarks")):
        for package in roots:
            for path in sorted((ROOT / package).rglob("*.py")):
                if ".venv" in path.parts or path.name == "test_deprecated_paths.py":
                    continue
                for node in ast.walk(ast.parse(path.read_text(), str(path))):
                    if isinstance(node, ast.Import):
                        names = [alias.name for alias in node.names]
                    elif isinstance(node, ast.ImportFrom) and not node.level:
                        names = [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
                    else:
                        continue
                    if any(name in old or name.startswith(tuple(f"{o}." for o in old)) for name in names):
                        wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: import the new path instead")
    assert not wrong, "\n".join(wrong)



@pytest.mark.parametrize(("importer", "imported"), [("tests", "benchmarks"), ("benchmarks", "tests")])
def test_the_tests_and_the_benchmarks_import_nothing_of_each_other(importer, imported):
    # What both need is product code (scheduler.simulation's fleets), or a few lines of each's own.
    wrong = []
    for path in sorted((ROOT / importer).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            if any(name == imported or name.startswith(f"{imported}.") for name in names):
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports {imported}")
    assert not wrong, "\n".join(wrong)

def berth_modules_loaded(module: str, root: pathlib.Path = ROOT) -> list[str]:
    """The Berth modules in sys.modules once ``python -c 'import <module>'`` has run in ``root``."""
    code = (f"import sys, {module}\n"
            f"print(' '.join(sorted(m for m in sys.modules if m.partition('.')[0] in {PACKAGES!r})))\n"
            f"print(' '.join(sorted(lib for lib in {IO_LIBRARIES!r} if lib in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    berth, _, io = out.stdout.partition("\n")
    return berth.split() + [f"<{lib}>" for lib in io.split()]


@pytest.mark.parametrize("module", ["scheduler.policy.filters.resources", "scheduler.conf"])
def test_importing_a_filter_or_the_options_loads_no_service(module):
    loaded = berth_modules_loaded(module)
    services = [m for m in loaded if m.startswith("<")
                or layer_of(m) not in {"contract", "base", "conf", "utils", "policy"}]
    assert not services, f"import {module} loads {', '.join(services)}"


def test_importing_the_agent_loads_nothing_of_the_schedulers_own():
    loaded = berth_modules_loaded("compute_agent.cmd.agent")
    scheduler_own = [m for m in loaded if layer_of(m) in {"db", "policy", "planning", "services", "cmd"}]
    assert not scheduler_own, f"the agent loads {', '.join(scheduler_own)}"


#: What a started agent says once it consumes; and the most a start may take (against a hang only).
AGENT_STARTED = "starting with"
AGENT_GUARD = 90


def agent_start_loads(tmp_path: pathlib.Path) -> list[str]:
    """What ``berth-compute-agent``'s main() has loaded once it started (its options registered,
    its driver built, its queues consumed) and stopped on SIGTERM: the Berth modules of the
    scheduler's own layers, and the I/O libraries of the database."""
    conf = tmp_path / "berth.conf"
    conf.write_text("[DEFAULT]\ntransport_url = memory://\nhost = c1\n"
                    f"state_path = {tmp_path / 'state'}\n[prometheus]\nlisten_port = 0\n"
                    "[compute_agent]\ndriver = fake\n")
    code = ("import atexit, sys\n"
            "atexit.register(lambda: print('LOADED', *sorted(m for m in sys.modules\n"
            f"    if m.partition('.')[0] in {PACKAGES!r} or m in ('sqlalchemy', 'alembic')), flush=True))\n"
            "from compute_agent.cmd import agent\n"
            f"sys.exit(agent.main(['--config-file', {str(conf)!r}]))\n")
    log = tmp_path / "agent.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        deadline = time.monotonic() + AGENT_GUARD
        while proc.poll() is None and time.monotonic() < deadline:
            if AGENT_STARTED in log.read_text(errors="replace"):
                proc.send_signal(signal.SIGTERM)
                break
            time.sleep(0.1)
        try:
            proc.wait(AGENT_GUARD)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    said = log.read_text(errors="replace")
    assert proc.returncode == 0 and AGENT_STARTED in said, said[-3000:]
    [loaded] = [line.split()[1:] for line in said.splitlines() if line.startswith("LOADED")]
    return [m for m in loaded if m in ("sqlalchemy", "alembic")
            or layer_of(m) in {"db", "policy", "planning", "services", "cmd"}]


def test_a_started_agent_has_loaded_neither_the_database_nor_the_schedulers_own(tmp_path):
    # The agent registers only the options it reads (scheduler.conf.AGENT_AREAS): the others'
    # modules would bring SQLAlchemy and alembic in with the scheduler's planning and moves.
    assert agent_start_loads(tmp_path) == []


def test_the_agents_option_areas_are_among_every_services():
    from scheduler import conf

    assert set(conf.AGENT_AREAS) <= set(conf.AREAS)


def main(argv):
    root = pathlib.Path(argv[1]).resolve() if len(argv) > 1 else ROOT
    found = imports(root)
    wrong = breaks(found)
    at_import = [w for w in wrong if not w[0].late]
    for imp, mine, theirs in wrong:
        print(_said(imp, mine, theirs))
    print(f"imports from a lower layer up to a higher one: {len(at_import)} at import, "
          f"{len(wrong) - len(at_import)} in functions")
    pairs: dict[tuple[str, str], int] = {}
    for _, mine, theirs in wrong:
        pairs[mine, theirs] = pairs.get((mine, theirs), 0) + 1
    for (mine, theirs), count in sorted(pairs.items()):
        print(f"  {mine} -> {theirs}: {count}")
    for module in ("scheduler.policy.filters.resources", "scheduler.conf", "compute_agent.cmd.agent"):
        loaded = berth_modules_loaded(module, root)
        libs = [m for m in loaded if m.startswith("<")]
        print(f"python -c 'import {module}': {len(loaded) - len(libs)} Berth modules"
              f"{' and ' + ', '.join(libs) if libs else ''}")


if __name__ == "__main__":
    main(sys.argv)
