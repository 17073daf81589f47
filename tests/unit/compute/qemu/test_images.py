"""Images by name from the image directory, and what is wrong with one said whole."""

import json

import pytest

from compute_agent.driver.qemu import images


def _describe(directory, name, **description):
    (directory / f"{name}.json").write_text(json.dumps(description))


def test_a_described_image_names_its_files_in_the_directory(tmp_path):
    for name in ("k", "i", "d.qcow2"):
        (tmp_path / name).write_bytes(b"x")
    _describe(tmp_path, "t", kernel_id="k", ramdisk_id="i", os_command_line="console=ttyS0", disk="d.qcow2",
              console_ready="up")
    image = images.find(str(tmp_path), "t")
    assert image == images.Image("t", kernel=str(tmp_path / "k"), ramdisk=str(tmp_path / "i"),
                                 command_line="console=ttyS0", disk=str(tmp_path / "d.qcow2"),
                                 disk_format="qcow2", console_ready="up")


def test_a_disk_alone_is_an_image(tmp_path):
    (tmp_path / "debian.raw").write_bytes(b"x")
    assert images.find(str(tmp_path), "debian") == images.Image("debian", disk=str(tmp_path / "debian.raw"),
                                                                 disk_format="raw")


@pytest.mark.parametrize("name, says", [
    ("missing", "no image missing in"),
    ("../etc/passwd", "is not an image name"),
    ("", "is not an image name"),
])
def test_a_name_that_is_no_image_is_refused(tmp_path, name, says):
    with pytest.raises(images.ImageError, match=says):
        images.find(str(tmp_path), name)


@pytest.mark.parametrize("description, says", [
    ({"kernel_id": "absent"}, "its kernel_id absent is not a file of"),
    ({"disk": "d", "disk_format": "vmdk"}, "disk_format 'vmdk' is not one of qcow2, raw"),
    ({"ramdisk_id": "d"}, "names neither a kernel_id nor a disk"),
    ({"disk": "d", "os_command_line": "quiet"}, "ramdisk_id and os_command_line need a kernel_id"),
    ({"disk": "d", "kernel": "d"}, "unknown keys kernel"),
    ({"disk": 1}, "disk in .* must be a string"),
])
def test_a_wrong_description_is_refused_with_what_is_wrong(tmp_path, description, says):
    (tmp_path / "d").write_bytes(b"x")
    _describe(tmp_path, "t", **description)
    with pytest.raises(images.ImageError, match=f"image t: .*{says}"):
        images.find(str(tmp_path), "t")


def test_a_description_that_is_not_json_is_refused(tmp_path):
    (tmp_path / "t.json").write_text("{")
    with pytest.raises(images.ImageError, match="image t: cannot read"):
        images.find(str(tmp_path), "t")
