"""The fast paths' version ranges: which releases each admits, and that setup.cfg pins them."""

import configparser
from pathlib import Path

import pytest

from scheduler.rpc import amqp_fast
from scheduler.utils import pins

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("version", "admitted"), [
    ("5.2.0", True), ("5.3.1", True), ("5.4.0", True), ("5.4.9.post1", True),
    ("5.1.1", False), ("5.5.0", False), ("5.5.0rc1", False), ("6.0", False),
    ("5.3.1.dev4", True), ("not.a.version", False), ("", False)])
def test_a_range_admits_the_releases_pip_would_install_for_it(version, admitted):
    assert pins.admits(">=5.2,<5.5", version) is admitted


@pytest.mark.parametrize(("library", "pin"), [("amqp", amqp_fast.TESTED_AMQP)])
def test_setup_cfg_requires_each_fast_path_library_from_its_tested_range_on_without_a_cap(library, pin):
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    requires = [line.strip() for line in parser["options"]["install_requires"].splitlines()]
    lower = pin.split(",")[0]
    assert f"{library}{lower}" in requires
    # No library is capped: distributions package Berth beside newer releases.
    assert not [r for r in requires if "<" in r and not r.startswith("#")]
