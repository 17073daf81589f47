"""Images by name from the image directory ([qemu] images_path).

An image is ``<name>.json``, a description in Glance's property names: ``kernel_id``,
``ramdisk_id`` and ``os_command_line`` for a kernel booted directly (file names in the
directory), ``disk`` and ``disk_format`` (qcow2 or raw) for a root disk each instance gets a
copy-on-write overlay of, and ``console_ready``, a line the guest prints on its serial console
once it is up (the build waits for it). Or it is a disk alone: ``<name>.qcow2`` or ``<name>.raw``.
"""

import dataclasses
import json
import os
import re

from compute_agent.driver.base import BuildFailed

DISK_FORMATS = ("qcow2", "raw")
#: An image's name: no path, no leading dot.
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,254}")
KEYS = {"name", "kernel_id", "ramdisk_id", "os_command_line", "disk", "disk_format", "console_ready",
        "hw_architecture"}


class ImageError(BuildFailed):
    """No such image, or one whose description is wrong: the build fails with this reason."""


@dataclasses.dataclass(frozen=True)
class Image:
    name: str
    kernel: str | None = None
    ramdisk: str | None = None
    command_line: str | None = None
    disk: str | None = None
    disk_format: str = "qcow2"
    console_ready: str | None = None


def find(images_path, name):
    """The image ``name`` of ``images_path``, its files checked to exist."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ImageError(f"{name!r} is not an image name (letters, digits, '_.+-', no path)")
    base = os.path.join(images_path, name)
    if os.path.isfile(base + ".json"):
        return _described(images_path, name, base + ".json")
    for disk_format in DISK_FORMATS:
        if os.path.isfile(f"{base}.{disk_format}"):
            return Image(name, disk=f"{base}.{disk_format}", disk_format=disk_format)
    raise ImageError(f"no image {name} in {images_path} ([qemu] images_path): neither {name}.json, "
                     f"{name}.qcow2 nor {name}.raw")


def _described(images_path, name, path):
    try:
        with open(path, encoding="utf-8") as f:
            description = json.load(f)
    except (OSError, ValueError) as exc:
        raise ImageError(f"image {name}: cannot read {path}: {exc}") from None
    if not isinstance(description, dict):
        raise ImageError(f"image {name}: {path} does not hold a JSON object")
    unknown = sorted(set(description) - KEYS)
    if unknown:
        raise ImageError(f"image {name}: {path} has unknown keys {', '.join(unknown)}; "
                         f"known: {', '.join(sorted(KEYS))}")
    for key, value in description.items():
        if not isinstance(value, str):
            raise ImageError(f"image {name}: {key} in {path} must be a string, not {value!r}"[:300])

    def file(key):
        value = description.get(key)
        if value is None:
            return None
        found = os.path.join(images_path, value)
        if not os.path.isfile(found):
            raise ImageError(f"image {name}: its {key} {value} is not a file of {images_path}")
        return found

    disk_format = description.get("disk_format", "qcow2")
    if disk_format not in DISK_FORMATS:
        raise ImageError(f"image {name}: disk_format {disk_format!r} is not one of {', '.join(DISK_FORMATS)}")
    image = Image(name, kernel=file("kernel_id"), ramdisk=file("ramdisk_id"),
                  command_line=description.get("os_command_line"), disk=file("disk"),
                  disk_format=disk_format, console_ready=description.get("console_ready"))
    if image.kernel is None and image.disk is None:
        raise ImageError(f"image {name}: {path} names neither a kernel_id nor a disk: nothing to boot")
    if image.kernel is None and (image.ramdisk or image.command_line):
        raise ImageError(f"image {name}: ramdisk_id and os_command_line need a kernel_id")
    return image
