"""The qemu command line of an instance, from its flavor and image."""

from compute_agent.driver.qemu.command import qemu_command
from compute_agent.driver.qemu.guest_files import GuestFiles
from compute_agent.driver.qemu.images import Image

UUID = "6f1c2e2a-93c4-4a4e-9a43-1f3f5d0c2b71"


def _option(argv, name):
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == name]


def test_a_kernel_image_is_booted_directly_with_the_flavors_memory_and_vcpus():
    files = GuestFiles.of("/srv/instances", UUID)
    image = Image("berth-test", kernel="/img/k", ramdisk="/img/i", command_line="console=ttyS0 quiet")
    argv = qemu_command("qemu-system-x86_64", "tcg", UUID, 128, 2, image, files)
    assert argv[0] == "qemu-system-x86_64"
    assert _option(argv, "-m") == ["128"] and _option(argv, "-smp") == ["2"]
    assert _option(argv, "-accel") == ["tcg"]
    assert _option(argv, "-kernel") == ["/img/k"] and _option(argv, "-initrd") == ["/img/i"]
    assert _option(argv, "-append") == ["console=ttyS0 quiet"]
    assert _option(argv, "-drive") == []
    assert _option(argv, "-pidfile") == [f"/srv/instances/{UUID}/qemu.pid"]
    assert "-daemonize" in argv
    chardevs = _option(argv, "-chardev")
    assert "socket,id=qmp,path=qmp.sock,server=on,wait=off" in chardevs  # qemu starts in its directory
    assert f"file,id=serial0,path=/srv/instances/{UUID}/console.log,append=on" in chardevs
    assert f"guest={UUID}," in _option(argv, "-name")[0]


def test_a_disk_image_boots_from_the_instances_overlay():
    files = GuestFiles.of("/srv/instances", UUID)
    argv = qemu_command("qemu", "kvm", UUID, 2048, 1, Image("debian", disk="/img/debian.qcow2"), files)
    # Its node named: what a live migration exports over NBD and mirrors.
    assert _option(argv, "-drive") == [f"file=/srv/instances/{UUID}/disk.qcow2,format=qcow2,if=virtio,"
                                       "cache=writeback,node-name=disk0"]
    assert _option(argv, "-kernel") == []


def test_a_comma_in_a_path_is_doubled_for_qemu():
    files = GuestFiles.of("/srv/a,b", UUID)
    argv = qemu_command("qemu", "tcg", UUID, 128, 1, Image("x", disk="/img/x.qcow2"), files)
    assert _option(argv, "-drive")[0].startswith(f"file=/srv/a,,b/{UUID}/disk.qcow2,format=qcow2")


def test_a_cpu_model_is_given_to_qemu_and_none_leaves_its_default():
    files = GuestFiles.of("/srv/instances", UUID)
    image = Image("x", disk="/img/x.qcow2")
    assert _option(qemu_command("qemu", "kvm", UUID, 128, 1, image, files, cpu="host"), "-cpu") == ["host"]
    assert _option(qemu_command("qemu", "tcg", UUID, 128, 1, image, files), "-cpu") == []


def test_an_ephemeral_disk_is_the_guests_second_disk():
    files = GuestFiles.of("/srv/instances", UUID)
    argv = qemu_command("qemu", "tcg", UUID, 128, 1, Image("x", disk="/img/x.qcow2"), files, ephemeral=True)
    assert _option(argv, "-drive") == [
        f"file=/srv/instances/{UUID}/disk.qcow2,format=qcow2,if=virtio,cache=writeback,node-name=disk0",
        f"file=/srv/instances/{UUID}/ephemeral.qcow2,format=qcow2,if=virtio,cache=writeback,node-name=ephemeral0"]
