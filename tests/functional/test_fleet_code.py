"""The processes a fleet starts run the code the tests import, wherever they start."""

import subprocess
import sys
from pathlib import Path

import pytest

import scheduler
from tests.functional.fleet import child_env

pytestmark = pytest.mark.functional


def test_a_process_started_in_a_temporary_directory_imports_the_code_under_test(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", "import compute_agent, scheduler; print(scheduler.__file__); "
         "print(compute_agent.__file__)"],
        cwd=tmp_path, env=child_env({"PYTHONPATH": str(tmp_path)}), capture_output=True, text=True,
        check=True)
    imported, agent = done.stdout.split()
    assert imported == scheduler.__file__
    assert Path(agent).parents[1] == Path(scheduler.__file__).parents[1]
