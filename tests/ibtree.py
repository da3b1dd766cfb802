"""Build /sys/class/infiniband trees under a test's tmp_path from the public ``ibstat``,
``ibstatus``, ``ibv_devinfo`` and ``show_gids`` outputs in tests/fixtures/ib/ (see its README), so the agent's real
collector reads them; and the facts the parser makes of them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from validator.agent.probe import ib_sysfs
from validator.facts.ib import parse_ib
from validator.model import IbFacts

FIXTURES = Path(__file__).parent / "fixtures" / "ib"
STATES = {"Active": "4: ACTIVE", "Down": "1: DOWN", "Initializing": "2: INIT", "Armed": "3: ARMED"}
PHYS = {"Sleep": "1: Sleep", "Polling": "2: Polling", "Disabled": "3: Disabled", "LinkUp": "5: LinkUp"}
ZERO = "0000:0000:0000:0000:0000:0000:0000:0000"


def _guid(text: str) -> str:
    h = text.removeprefix("0x").rjust(16, "0")
    return ":".join(h[i : i + 4] for i in range(0, 16, 4))


def sysfs_files(name: str) -> dict[str, str]:
    """A fixture as sysfs files: path under /sys/class/infiniband -> content."""
    text = (FIXTURES / name).read_text()
    files: dict[str, str] = {}
    if name.startswith("ibstat-"):
        dev = port = ""
        words = {"State": ("state", STATES), "Physical state": ("phys_state", PHYS), "Link layer": ("link_layer", {})}
        for line in text.splitlines():
            if m := re.match(r"CA '(\S+)'", line):
                dev = m.group(1)
            elif m := re.match(r"\s+Port (\d+):", line):
                port = f"{dev}/ports/{m.group(1)}"
                for g in range(8):  # an unpopulated GID table, as the kernel shows one
                    files[f"{port}/gids/{g}"] = ZERO
            elif m := re.match(r"\s+(Firmware version|Node GUID): (\S+)", line):
                key = "fw_ver" if m.group(1) == "Firmware version" else "node_guid"
                files[f"{dev}/{key}"] = m.group(2) if key == "fw_ver" else _guid(m.group(2))
            elif port and (m := re.match(r"\s+(State|Physical state|Link layer|Rate): (\S+)", line)):
                if m.group(1) == "Rate":
                    files[f"{port}/rate"] = f"{m.group(2)} Gb/sec"
                else:
                    key, table = words[m.group(1)]
                    files[f"{port}/{key}"] = table.get(m.group(2), m.group(2))
    elif name.startswith("ibstatus-"):
        port = ""
        for line in text.splitlines():
            if m := re.match(r"Infiniband device '(\S+)' port (\d+) status:", line):
                port = f"{m.group(1)}/ports/{m.group(2)}"
            elif m := re.match(r"\s+(state|phys state|rate|link_layer):\s+(.+)", line):
                files[f"{port}/{m.group(1).replace(' ', '_')}"] = m.group(2).strip()
            elif m := re.match(r"\s+default gid:\s+(\S+)", line):
                files[f"{port}/gids/0"] = m.group(1)
    elif name.startswith("ibv_devinfo-"):
        dev = port = ""
        width = speed = 0.0
        for line in text.splitlines():
            if m := re.match(r"hca_id:\s+(\S+)", line):
                dev = m.group(1)
            elif m := re.match(r"\s+(fw_ver|node_guid):\s+(\S+)", line):
                files[f"{dev}/{m.group(1)}"] = m.group(2)
            elif m := re.match(r"\s+port:\s+(\d+)", line):
                port = f"{dev}/ports/{m.group(1)}"
            elif m := re.match(r"\s+state:\s+PORT_(\w+) \((\d)\)", line):
                files[f"{port}/state"] = f"{m.group(2)}: {m.group(1)}"
            elif m := re.match(r"\s+phys_state:\s+(\w+) \((\d)\)", line):
                word = {"LINK_UP": "LinkUp", "POLLING": "Polling", "DISABLED": "Disabled", "SLEEP": "Sleep"}
                files[f"{port}/phys_state"] = f"{m.group(2)}: {word.get(m.group(1), m.group(1))}"
            elif m := re.match(r"\s+link_layer:\s+(\S+)", line):
                files[f"{port}/link_layer"] = m.group(1)
            elif m := re.match(r"\s+active_width:\s+(\d+)X", line):
                width = float(m.group(1))
            elif m := re.match(r"\s+active_speed:\s+([\d.]+) Gbps", line):
                speed = float(m.group(1))
                files[f"{port}/rate"] = f"{width * speed:g} Gb/sec ({width:g}X)"
            elif m := re.match(r"\s+GID\[\s*(\d+)\]:\s+(\S+)", line):
                for g in range(int(m.group(1))):
                    files.setdefault(f"{port}/gids/{g}", ZERO)
                files[f"{port}/gids/{m.group(1)}"] = m.group(2)
    elif name.startswith("show_gids-"):
        for line in text.splitlines()[2:]:
            f = line.split("\t")
            f = [x.strip() for x in f if x.strip()]
            dev, port, index, gid, ver, ndev = f[0], f[1], f[2], f[3], f[-2], f[-1]
            base = f"{dev}/ports/{port}"
            files[f"{base}/gids/{index}"] = gid
            files[f"{base}/gid_attrs/types/{index}"] = "RoCE v2" if ver == "v2" else "IB/RoCE v1"
            files[f"{base}/gid_attrs/ndevs/{index}"] = ndev
            for g in range(int(index)):
                files.setdefault(f"{base}/gids/{g}", ZERO)
    return files


def build(root: Path, *fixtures: str, change: dict[str, str | None] | None = None) -> Path:
    """Write the fixtures' files under ``root``/sys/class/infiniband; ``change``: path -> new
    content (None removes the file). Returns the tree's root."""
    top = root / "sys" / "class" / "infiniband"
    files: dict[str, str] = {}
    for name in fixtures:
        files.update(sysfs_files(name))
    for path, content in (change or {}).items():
        if content is None:
            files.pop(path, None)
        else:
            files[path] = content
    for path, content in files.items():
        (top / path).parent.mkdir(parents=True, exist_ok=True)
        (top / path).write_text(content + "\n")
    top.mkdir(parents=True, exist_ok=True)
    return top


def raw(root: Path, *fixtures: str, change: dict[str, str | None] | None = None) -> dict[str, Any]:
    """What the agent reads from a tree built of ``fixtures``."""
    return ib_sysfs(str(build(root, *fixtures, change=change)))


def ib_facts(
    root: Path, *fixtures: str, env: dict[str, str] | None = None, change: dict[str, str | None] | None = None
) -> IbFacts:
    facts = parse_ib(raw(root, *fixtures, change=change), env or {})
    assert facts is not None
    return facts
