"""Nova's classic m1 flavors: the ones ``berth-manage db sync`` stores first (migration 0008
keeps its own copy), and those the simulator and berth-all-in-one's demo request by name.
``berth server create --flavor NAME`` reads the scheduler's stored flavors instead."""

FLAVORS = {
    "m1.tiny": {"memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0, "vcpus": 1},
    "m1.small": {"memory_mb": 2048, "root_gb": 20, "ephemeral_gb": 0, "vcpus": 1},
    "m1.medium": {"memory_mb": 4096, "root_gb": 40, "ephemeral_gb": 0, "vcpus": 2},
    "m1.large": {"memory_mb": 8192, "root_gb": 80, "ephemeral_gb": 0, "vcpus": 4},
    "m1.xlarge": {"memory_mb": 16384, "root_gb": 160, "ephemeral_gb": 0, "vcpus": 8},
}


def get(name):
    try:
        return dict(FLAVORS[name], name=name)
    except KeyError:
        raise ValueError(
            f"unknown flavor {name!r}; known: {', '.join(FLAVORS)} "
            "(or give --flavor-ram, --flavor-disk and --flavor-vcpus)"
        ) from None
