"""Real guests under qemu (TCG unless KVM works), booted by real agents: what these tests need
is installed, or they skip saying what is missing; with BERTH_TEST_REQUIRE_GUESTS=1 (as CI sets
it) they fail instead."""

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import scheduler  # noqa: F401  (applies BERTH_CONCURRENCY before kombu & co. load)

ROOT = Path(__file__).resolve().parents[2]
REQUIRE = "BERTH_TEST_REQUIRE_GUESTS"
#: Debian's packages of what a guest is made of and run with.
NEEDED = {
    "qemu-system-x86_64": "qemu-system-x86",
    "qemu-img": "qemu-utils",
    "busybox": "busybox-static",
}


def missing():
    """What is missing to boot a test guest, as the Debian packages to install; [] when nothing."""
    packages = [package for binary, package in NEEDED.items() if shutil.which(binary) is None]
    if not glob.glob("/boot/vmlinuz-*"):
        packages.append("linux-image-cloud-amd64")
    return packages


@pytest.fixture(scope="session")
def guest_image(tmp_path_factory):
    """The directory of the test image berth-test, built by tools/build-guest-image."""
    absent = missing()
    if absent:
        install = f"apt-get install --no-install-recommends {' '.join(absent)}"
        why = f"real guests need {', '.join(absent)} ({install})"
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{REQUIRE}=1 and {why}", pytrace=False)
        pytest.skip(why)
    directory = tmp_path_factory.mktemp("images")
    built = subprocess.run([sys.executable, str(ROOT / "tools" / "build-guest-image"), str(directory)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return directory
