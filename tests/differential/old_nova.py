"""The filters Nova 34 dropped, taken from the last Nova releases that shipped them.

Each release's wheel is fetched once with ``pip download nova==<version> --no-deps``
into ``$NOVA_PARITY_CACHE`` (default: a folder under the system's temporary
directory); only the filter module is read out of it and imported beside
Nova 34, under a private module name. The modules import
``nova.scheduler.filters`` (BaseHostFilter) and ``nova.scheduler.filters.utils``,
which resolve to Nova 34's: their code runs unchanged. The one adaptation:
Nova 27's AvailabilityZoneFilter reads ``[scheduler]
query_placement_for_availability_zone`` in its constructor, an option Nova 34
no longer registers; :func:`load` registers it (default True, as in Nova 27)
when it is missing, which changes no decision of the filter.
"""

import importlib.util
import logging
import os
import pathlib
import subprocess
import sys
import tempfile
import zipfile

#: filter class -> (Nova release, module under nova/scheduler/filters/): the last release
#: (last point release of the last series) whose wheel has the class.
DROPPED = {
    "RamFilter": ("19.3.2", "ram_filter"),  # removed in 20.0.0 (Train)
    "DiskFilter": ("19.3.2", "disk_filter"),
    "CoreFilter": ("19.3.2", "core_filter"),
    "AggregateRamFilter": ("21.2.4", "ram_filter"),  # removed in 22.0.0 (Victoria)
    "AggregateDiskFilter": ("21.2.4", "disk_filter"),
    "AggregateCoreFilter": ("21.2.4", "core_filter"),
    "RetryFilter": ("21.2.4", "retry_filter"),
    "AvailabilityZoneFilter": ("27.5.1", "availability_zone_filter"),  # removed in 28.0.0 (Bobcat)
}


def cache_dir():
    path = pathlib.Path(os.environ.get("NOVA_PARITY_CACHE")
                        or pathlib.Path(tempfile.gettempdir()) / "nova-parity-cache")
    path.mkdir(parents=True, exist_ok=True)
    return path


def wheel(version):
    """The wheel of nova==``version`` in the cache, downloaded on first use."""
    folder = cache_dir() / version
    found = sorted(folder.glob(f"nova-{version}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                        "--no-deps", "--only-binary=:all:", f"nova=={version}", "-d", str(folder)],
                       check=True)
        found = sorted(folder.glob(f"nova-{version}-*.whl"))
    return found[0]


def source(version, module):
    """The path of nova/scheduler/filters/``module``.py of release ``version``, extracted."""
    target = cache_dir() / version / "src" / f"{module}.py"
    if not target.exists():
        with zipfile.ZipFile(wheel(version)) as whl:
            text = whl.read(f"nova/scheduler/filters/{module}.py")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text)
    return target


_loaded = {}


def load(name):
    """Nova's filter class ``name`` from the last release that had it."""
    version, module = DROPPED[name]
    key = (version, module)
    if key not in _loaded:
        import nova.conf
        from oslo_config import cfg

        conf = nova.conf.CONF
        if module == "availability_zone_filter":
            try:
                conf.scheduler.query_placement_for_availability_zone  # noqa: B018
            except cfg.NoSuchOptError:
                conf.register_opt(cfg.BoolOpt("query_placement_for_availability_zone", default=True),
                                  group="scheduler")
        mod_name = f"nova_parity_old_{version.replace('.', '_')}_{module}"
        spec = importlib.util.spec_from_file_location(mod_name, source(version, module))
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = loaded
        logging.getLogger(mod_name).setLevel(logging.ERROR)  # their deprecation warnings
        spec.loader.exec_module(loaded)
        _loaded[key] = loaded
    return getattr(_loaded[key], name)
