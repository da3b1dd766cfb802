"""What the blind set zu (tests/corpus/diagnose/heldout-zu.md) showed was not read, written from the source's own
format string, not from the set's cases (the log below is built from it): NCCL's topology, "Could not find real path
of %s" (src/os/linux.cc ncclOsGetPciPath; net_ib/init.cc's "(%s)" form), a realpath() of the host's own sysfs that
failed (ncclSystemError): the host that printed it is the one to look at."""

from __future__ import annotations

from pathlib import Path

from .corpus import verdict


def test_nccls_real_path_failure_is_the_hosts_own(tmp_path: Path) -> None:
    log = (
        "gpu-a7:18739:19248 [5] NCCL WARN Could not find real path of /sys/class/pci_bus/0000:b1/../../0000:b1:00.0\n"
        "gpu-a7:18739:19248 [5] NCCL INFO graph/topo.cc:523 -> 2\n"
        "gpu-a7:18739:19248 [5] NCCL INFO init.cc:586 -> 2\n"
    )
    got = verdict(tmp_path, log)
    assert (got.klass, got.hosts) == ("nccl_system_error", ["gpu-a7"])
    log = "gpu-a7:1:2 [0] NCCL WARN Could not find real path of mlx5_0 (/sys/class/infiniband/mlx5_0/device)\n"
    assert verdict(tmp_path, log).hosts == ["gpu-a7"]
