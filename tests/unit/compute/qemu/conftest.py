import os
import stat

import pytest

from compute_agent import conf as agent_conf
from scheduler import conf as berth_conf


@pytest.fixture
def qemu_conf(tmp_path):
    """Options of a qemu driver whose images and instances are under ``tmp_path``."""
    conf = berth_conf.new_conf()
    agent_conf.register_opts(conf)
    conf([])
    conf.set_override("state_path", str(tmp_path / "state"))
    conf.set_override("images_path", str(tmp_path / "images"), "qemu")
    conf.set_override("accel", "tcg", "qemu")
    # No qemu needed: a stand-in that says its version and starts nothing.
    conf.set_override("binary", write_script(tmp_path / "qemu-system-x86_64",
                                             'echo "QEMU emulator version 7.2.22 (Debian)"\n'), "qemu")
    os.makedirs(tmp_path / "images")
    yield conf
    conf.reset()


def write_script(path, text):
    """An executable shell script at ``path`` (a stand-in for qemu)."""
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)
