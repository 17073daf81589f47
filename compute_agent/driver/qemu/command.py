"""The qemu command line of an instance, from its flavor, its image and its files."""

QMP_ID = "qmp"
SERIAL_ID = "serial0"
#: The node name of the guest's disk (its qcow2 overlay's format node): what a live migration
#: exports over NBD on its destination and mirrors on its source.
DISK_NODE = "disk0"
#: The node name of its ephemeral disk (a blank qcow2), when its flavor has one.
EPHEMERAL_NODE = "ephemeral0"


def _escaped(path):
    """A path as a value of qemu's comma-separated options (a comma doubled)."""
    return path.replace(",", ",,")


def qemu_command(binary, accel, name, memory_mb, vcpus, image, files, cpu=None, ephemeral=False):
    """argv of a qemu that daemonizes (its own session: it outlives the agent), writes its pid
    file, serves QMP on ``files.qmp`` (named relative to ``files.directory``, where qemu must be
    started) and appends its serial console to ``files.console``.
    ``image``: images.Image; the disk is ``files.disk`` (a qcow2 overlay) when the image has one.
    ``cpu``: the CPU model the guest sees (qemu's default when None); ``ephemeral``: the instance
    has an ephemeral disk, ``files.ephemeral``, its second virtio disk."""
    argv = [
        binary,
        "-name", f"guest={name},process=berth-{name}",
        "-accel", accel,
        "-m", str(memory_mb),
        "-smp", str(vcpus),
        *(["-cpu", cpu] if cpu else []),
        "-nodefaults", "-no-user-config", "-display", "none",
        # A guest that resets boots again in place; one that powers off (or panics, and says so
        # through pvpanic) stops and waits, its qemu kept, for the agent to see why.
        "-action", "reboot=reset,shutdown=pause,panic=pause", "-device", "pvpanic",
        "-chardev", f"socket,id={QMP_ID},path={_escaped(files.QMP_NAME)},server=on,wait=off",
        "-mon", f"chardev={QMP_ID},mode=control",
        "-chardev", f"file,id={SERIAL_ID},path={_escaped(files.console)},append=on",
        "-serial", f"chardev:{SERIAL_ID}",
        "-pidfile", files.pid,
        "-D", files.log,
        "-daemonize",
    ]
    if image.disk is not None:
        argv += ["-drive", f"file={_escaped(files.disk)},format=qcow2,if=virtio,cache=writeback,"
                           f"node-name={DISK_NODE}"]
    if ephemeral:
        argv += ["-drive", f"file={_escaped(files.ephemeral)},format=qcow2,if=virtio,cache=writeback,"
                           f"node-name={EPHEMERAL_NODE}"]
    if image.kernel is not None:
        argv += ["-kernel", image.kernel]
        if image.ramdisk is not None:
            argv += ["-initrd", image.ramdisk]
        if image.command_line:
            argv += ["-append", image.command_line]
    return argv
