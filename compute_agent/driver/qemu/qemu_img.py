"""qemu-img (qemu-utils), run for the qemu driver: what fails is said in one line."""

import json
import subprocess

#: Seconds a qemu-img that reads or makes a disk (not one that copies it) may take.
TIMEOUT = 60


def run(args, what, failure):
    """The output of ``qemu-img ARGS``; raises ``failure`` (an exception class) saying that
    ``what`` could not be done, and why."""
    try:
        done = subprocess.run(["qemu-img", *args], capture_output=True, text=True, timeout=TIMEOUT)
    except FileNotFoundError:
        raise failure(f"{what}: qemu-img is not installed (qemu-utils)") from None
    except subprocess.TimeoutExpired:
        raise failure(f"{what}: qemu-img did not finish within {TIMEOUT} s") from None
    except OSError as exc:
        raise failure(f"{what}: {exc}") from None
    if done.returncode != 0:
        raise failure(f"{what}: {last_line(done.stderr) or f'qemu-img exit status {done.returncode}'}")
    return done.stdout


def virtual_size(path, disk_format, what, failure):
    """The size the guest sees of the disk ``path`` (a file, or an nbd:// URI), read even while a
    qemu holds it (-U); ``failure`` as run's."""
    info = run(["info", "--output=json", "-U", "-f", disk_format, path], what, failure)
    return int(json.loads(info)["virtual-size"])


def last_line(text):
    """The last line of ``text`` that says something, or ''."""
    said = [line for line in (text or "").splitlines() if line.strip()]
    return said[-1] if said else ""
