"""Where an instance's files are: one directory per instance under [qemu] instances_path."""

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class GuestFiles:
    directory: str

    @classmethod
    def of(cls, instances_path, uuid):
        return cls(os.path.join(os.path.abspath(instances_path), uuid))

    @property
    def disk(self):
        return os.path.join(self.directory, "disk.qcow2")

    @property
    def ephemeral(self):
        """The instance's ephemeral disk, when its flavor has one: a blank qcow2 of its size."""
        return os.path.join(self.directory, "ephemeral.qcow2")

    @property
    def console(self):
        return os.path.join(self.directory, "console.log")

    #: The QMP socket's name in the directory: qemu, started there, is given the name alone, so
    #: that no instances_path is too long for a unix socket's address (qmp.connect).
    QMP_NAME = "qmp.sock"

    @property
    def qmp(self):
        return os.path.join(self.directory, self.QMP_NAME)

    @property
    def pid(self):
        return os.path.join(self.directory, "qemu.pid")

    @property
    def incoming(self):
        """The transfer of a live migration this directory's qemu waits for (JSON)."""
        return os.path.join(self.directory, "incoming.json")

    @property
    def log(self):
        """What qemu itself says (its -D log and its errors at start)."""
        return os.path.join(self.directory, "qemu.log")

    @property
    def image(self):
        """The name of the image the guest was made from, kept to boot it again (berth server start)."""
        return os.path.join(self.directory, "image")

    def read_image(self):
        try:
            with open(self.image, encoding="utf-8") as f:
                return f.read().strip() or None
        except OSError:
            return None

    def has_disk(self):
        return os.path.exists(self.disk)

    def read_pid(self):
        """The pid qemu wrote, or None when there is no pid file (or not a pid in it)."""
        try:
            with open(self.pid, encoding="ascii") as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def console_tail(self, lines=5):
        """The last ``lines`` lines of the serial console, or '' when it has none."""
        try:
            with open(self.console, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 8192))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        kept = [line.strip() for line in text.replace("\r", "\n").split("\n") if line.strip()]
        tail = kept[-lines:]
        panics = [line for line in kept if "Kernel panic" in line]
        if panics and panics[-1] not in tail:  # the reason, above the stack trace that follows it
            tail = [panics[-1], "...", *tail]
        return " | ".join(tail)
