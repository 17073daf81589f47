"""A PEP 517 build backend of the standard library alone.

It builds a pure-Python wheel of the packages beside it, with the name,
version and entry points of pyproject.toml's [project] table: so installing
the test plugins with pip needs neither the network nor setuptools' wheel
support. Not for anything else.
"""

import base64
import hashlib
import pathlib
import tomllib
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent


def _files(project):
    dist_info = f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    files = {}
    for package in sorted(p.parent for p in ROOT.glob("*/__init__.py")):
        for path in sorted(package.rglob("*.py")):
            files[path.relative_to(ROOT).as_posix()] = path.read_bytes()
    files[f"{dist_info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
        f"Summary: {project.get('description', '')}\n"
    ).encode()
    files[f"{dist_info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: build_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    files[f"{dist_info}/entry_points.txt"] = "".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in entries.items()) + "\n"
        for group, entries in project.get("entry-points", {}).items()
    ).encode()
    return dist_info, files


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    dist_info, files = _files(project)
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}\n")
    record.append(f"{dist_info}/RECORD,,\n")
    files[f"{dist_info}/RECORD"] = "".join(record).encode()
    name = f"{project['name'].replace('-', '_')}-{project['version']}-py3-none-any.whl"
    with zipfile.ZipFile(pathlib.Path(wheel_directory) / name, "w") as wheel:
        for path, data in files.items():
            wheel.writestr(path, data)
    return name
