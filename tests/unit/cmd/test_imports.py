"""The command-line package imports in one direction: cli.py builds the parser from the
commands' modules, and they take what they share from modules of their own (arguments,
output, references, waiting), never from cli.py nor from inside a function."""

import ast
import pathlib

import scheduler.cmd

PACKAGE = "scheduler.cmd"
FOLDER = pathlib.Path(scheduler.cmd.__file__).parent
MODULES = {path.stem: path for path in FOLDER.glob("*.py") if path.stem != "__init__"}


def imports(tree):
    """(module of the package imported, the import statement) of every import in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found = {name.split(".")[2] for name in names if name.startswith(PACKAGE + ".")}
        for module in sorted(found & MODULES.keys()):
            yield module, node


def graph():
    """{module: {modules of the package it imports}}, and the imports not at a module's top."""
    edges, nested = {}, []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        top = set(tree.body)
        edges[name] = set()
        for imported, node in imports(tree):
            edges[name].add(imported)
            if node not in top:
                nested.append(f"{name}.py:{node.lineno} imports {imported}")
    return edges, nested


def test_modules_of_the_package_import_each_other_only_at_their_top():
    _, nested = graph()
    assert not nested


def test_no_command_module_imports_the_cli():
    edges, _ = graph()
    assert [name for name, imported in edges.items() if "cli" in imported] == []


def test_the_package_imports_without_a_circle():
    edges, _ = graph()
    done, path = set(), []

    def visit(name):
        assert name not in path, f"import circle: {' -> '.join(path + [name])}"
        if name in done:
            return
        path.append(name)
        for imported in sorted(edges[name]):
            visit(imported)
        path.pop()
        done.add(name)

    for name in sorted(edges):
        visit(name)
