"""Software versions and system limits, from the agent's raw readings."""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from typing import Any

    from validator.model import SoftwareFacts, SystemFacts


def major_minor(text: object) -> tuple[int, int] | None:
    """(major, minor) of a version string ("2.21.5", "2.6.0+cu124"), or None when it has none."""
    m = re.match(r"(\d+)\.(\d+)", text) if isinstance(text, str) else None
    return (int(m[1]), int(m[2])) if m else None


def nccl_version(code: int | None) -> str | None:
    """NCCL_VERSION_CODE: major*10000+minor*100+patch since 2.9, major*1000+minor*100+patch before."""
    if not isinstance(code, int) or code <= 0:
        return None
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def torch_cuda(version_py: str | None) -> str | None:
    m = re.search(r"^cuda(?:\s*:\s*[^=]+)?\s*=\s*'([^']+)'", version_py or "", re.M)
    return m.group(1) if m else None


def parse_software(raw: dict[str, Any]) -> SoftwareFacts:
    pkgs = raw.get("packages") or {}
    nccl = raw.get("nccl") or {}
    wheel = next((v for k, v in pkgs.items() if k.startswith("nvidia-nccl-")), None)
    return {
        "python": str(raw.get("python", "")),
        "torch": pkgs.get("torch"),
        "torch_cuda": torch_cuda(pkgs.get("torch_version_py")),
        "nccl": nccl_version(nccl.get("code")) or (wheel.split("+")[0] if wheel else None),
        "nccl_path": nccl.get("path") or (f"nvidia-nccl wheel {wheel}" if wheel else None),
        "deepspeed": pkgs.get("deepspeed"),
        "transformers": pkgs.get("transformers"),
    }


def parse_system(raw: dict[str, Any]) -> SystemFacts:
    lim = raw.get("limits") or {}
    somax = (raw.get("sysctl") or {}).get("somaxconn")
    memlock = lim.get("memlock") or [None, None]
    nofile = lim.get("nofile") or [None, None]
    return {
        "shm_bytes": lim.get("shm_bytes"),
        "memlock_soft": memlock[0],
        "memlock_hard": memlock[1],
        "nofile_soft": nofile[0],
        "nofile_hard": nofile[1],
        "somaxconn": int(somax) if somax and str(somax).isdecimal() else None,
        "ib_devices": list(raw.get("ib_devices") or []),
        "time": float(raw.get("time") or 0.0),
    }
