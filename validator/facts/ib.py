"""RDMA ports from sysfs, and which of them NCCL would use, by NCCL's own rules.

Sources (NVIDIA/nccl master, 5067397c):
- ``src/transport/net_ib/init.cc::ncclIbInitDevices``: ``NCCL_IB_DISABLE`` (any non-zero
  integer) fails IB init; ``NCCL_IB_HCA``: a leading ``^`` excludes, then ``=`` asks for exact
  names; only ports in state ``IBV_PORT_ACTIVE`` with link layer InfiniBand or Ethernet are
  considered, then ``matchIfList(name, port, list, exact) ^ searchNot`` decides; none found:
  ``NET/IB : No device found.``
- ``src/misc/utils.cc::parseStringList``: comma list of ``<prefix>[:<port>[:<rail>[:<plane>]]]``,
  empty entries skipped, the port read by ``atoi`` (absent: any port);
  ``matchIf``: a prefix compares ``strlen(ref)`` characters, exact includes the NUL;
  ``matchIfList``: an empty list matches everything.
- ``src/misc/param.cc::ncclLoadParam``: integer variables are read by ``strtoll(s, NULL, 0)``;
  an empty value keeps the default.
- ``src/plugin/net.cc::ncclNetInit``: nets are tried in order (external plugins, ``IB``,
  ``Socket``), those whose name differs from ``NCCL_NET`` (``strcasecmp``) skipped; a net with
  no device is passed over, so IB without a usable port falls back to sockets silently; none
  left: ``Failed to initialize any NET plugin``.
- ``src/transport/net_ib/connect.cc::ncclIbGetGidIndex``/``ncclUpdateGidIndex``: RoCE uses
  ``NCCL_IB_GID_INDEX`` when set, else a GID of ``NCCL_IB_ROCE_VERSION_NUM`` (default 2, the
  type read from ``gid_attrs/types``) in ``NCCL_IB_ADDR_FAMILY`` (default AF_INET: an
  IPv4-mapped GID) that is configured and not link-local (``validGid``); none: index 0.
  ``NCCL_IB_ADDR_RANGE`` is not modelled. InfiniBand uses index 0.
External net plugins (``NCCL_NET_PLUGIN``, ``libnccl-net.so``) are tried before IB; whether one
loads cannot be told from sysfs, so the transport here is the internal one's.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from typing import Any

    from validator.model import IbDevice, IbFacts, IbPort


MAX_IB_DEVS = 32  # NCCL's MAX_IB_DEVS: the most HCA list entries it parses
IB_GID_SLOTS = 128  # the agent's IB_MAX["gid_slots"]: slots read when a reading does not say


def strtoll(value: str | None) -> int | None:
    """C ``strtoll(value, NULL, 0)`` as NCCL reads integer variables: the leading number (``0x``
    hex, ``0`` octal), 0 when there is none; None when unset or empty (NCCL keeps its default)."""
    if not value:
        return None
    m = re.match(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", value)
    if not m:
        return 0
    digits = m.group(2)
    n = int(digits, 16) if digits[:2].lower() == "0x" else int(digits, 8) if digits.startswith("0") else int(digits)
    return -n if m.group(1) == "-" else n


def _atoi(text: str) -> int:
    m = re.match(r"\s*([+-]?\d+)", text)
    return int(m.group(1)) if m else 0


def parse_hca_list(value: str | None) -> tuple[bool, bool, list[tuple[str, int]]]:
    """``NCCL_IB_HCA`` -> (exclude, exact, [(prefix, port)]); port -1 means any port."""
    if value is None:
        return False, False, []
    exclude = value.startswith("^")
    value = value[1:] if exclude else value
    exact = value.startswith("=")
    value = value[1:] if exact else value
    out: list[tuple[str, int]] = []
    for entry in value.split(","):
        fields = entry.split(":")
        if fields[0] and len(out) < MAX_IB_DEVS:
            out.append((fields[0], _atoi(fields[1]) if len(fields) > 1 and fields[1] else -1))
    return exclude, exact, out


def hca_matches(device: str, port: int, entries: list[tuple[str, int]], exact: bool) -> bool:
    """``matchIfList``: an empty list matches everything."""
    if not entries:
        return True
    return any(
        (device == prefix if exact else device.startswith(prefix)) and (want == -1 or want == port)
        for prefix, want in entries
    )


def _word(text: str | None) -> str | None:
    """sysfs ``4: ACTIVE`` -> ``ACTIVE``; ``5: LinkUp`` -> ``LinkUp``."""
    if not text:
        return None
    return text.split(":", 1)[-1].strip() or None


def _gbps(rate: str | None) -> float | None:
    m = re.match(r"\s*(\d+(?:\.\d+)?)", rate or "")
    return float(m.group(1)) if m else None


def _valid_gid(gid: str) -> bool:
    """Configured and not link-local (NCCL's ``validGid``)."""
    return not gid.lower().startswith("fe80:") and gid.strip("0:") != ""


def _ipv4_mapped(gid: str) -> bool:
    """``::ffff:a.b.c.d`` (NCCL's ``getGidAddrFamily`` says AF_INET)."""
    return re.fullmatch(r"(0000:){5}ffff:[0-9a-f]{4}:[0-9a-f]{4}", gid.lower()) is not None


def _gid_ok(gids: list[list[Any]], slots: int, env: dict[str, str], gid_index: int | None) -> bool | None:
    """RoCE: would NCCL find a GID? NCCL_IB_GID_INDEX set: that slot is populated (None when the
    agent did not read that far: ``slots``). Unset: ``ncclIbGetGidIndex`` wants a configured, not
    link-local GID of NCCL_IB_ROCE_VERSION_NUM (default 2) in NCCL_IB_ADDR_FAMILY (default AF_INET)."""
    if gid_index is not None and gid_index >= 0:
        if any(g[0] == gid_index for g in gids):
            return True
        return False if gid_index < slots else None
    if not gids:
        return None  # nothing read (all empty as far as the agent looked, or unreadable): unknown
    version = strtoll(env.get("NCCL_IB_ROCE_VERSION_NUM"))
    kind = "IB/RoCE v1" if version == 1 else "RoCE v2"
    v4 = env.get("NCCL_IB_ADDR_FAMILY", "AF_INET") != "AF_INET6"
    return any(g[2] == kind and _valid_gid(str(g[1])) and _ipv4_mapped(str(g[1])) == v4 for g in gids)


def _port(dev: str, netdevs: list[str], raw: dict[str, Any], hca: tuple[bool, bool, list[tuple[str, int]]],
          env: dict[str, str], ib_on: bool) -> IbPort:  # fmt: skip
    num = _atoi(str(raw.get("port", "0")))
    state, link = _word(raw.get("state")), raw.get("link_layer") or None
    gids = [g for g in raw.get("gids") or [] if isinstance(g, list) and len(g) == 4 and isinstance(g[0], int)]
    gid_index = strtoll(env.get("NCCL_IB_GID_INDEX"))
    slots = raw.get("gid_slots")
    slots = slots if isinstance(slots, int) else IB_GID_SLOTS
    roce = link == "Ethernet"
    exclude, exact, entries = hca
    selected = hca_matches(dev, num, entries, exact) != exclude
    return {
        "device": dev,
        "port": num,
        "name": f"{dev}:{num}",
        "state": state,
        "phys_state": _word(raw.get("phys_state")),
        "rate": raw.get("rate") or None,
        "rate_gbps": _gbps(raw.get("rate")),
        "link_layer": link,
        "netdev": next((str(g[3]) for g in gids if g[3]), None) or (netdevs[0] if netdevs else None),
        "roce_v2": any(g[2] == "RoCE v2" and _valid_gid(str(g[1])) for g in gids) if roce else None,
        "gid_ok": _gid_ok(gids, slots, env, gid_index) if roce else None,
        "selected": selected,
        "used": ib_on and selected and state == "ACTIVE" and link in ("InfiniBand", "Ethernet"),
    }


def parse_ib(raw: dict[str, Any] | None, env: dict[str, str]) -> IbFacts | None:
    """The agent's ``ib`` reading and the job's NCCL variables -> IbFacts (None: not collected)."""
    if raw is None:
        return None
    hca_text = env.get("NCCL_IB_HCA")
    disable = strtoll(env.get("NCCL_IB_DISABLE"))
    gid_index = strtoll(env.get("NCCL_IB_GID_INDEX"))
    net = env.get("NCCL_NET")
    hca = parse_hca_list(hca_text)
    ib_on = not disable and (not net or net.lower() == "ib")  # NCCL_NET names another net: IB is skipped
    devices: list[IbDevice] = []
    for d in raw.get("devices") or []:
        name = str(d.get("name", ""))
        netdevs = [str(n) for n in d.get("netdevs") or []]
        ports = [_port(name, netdevs, p, hca, env, ib_on) for p in d.get("ports") or []]
        devices.append({"name": name, "node_guid": d.get("node_guid"), "fw_ver": d.get("fw_ver"), "ports": ports})
    used = [p["name"] for d in devices for p in d["ports"] if p["used"]]
    error = None
    if net and net.lower() not in ("ib", "socket"):
        transport, rule = net, f"NCCL_NET={net} (an external net plugin)"
    elif net and net.lower() == "socket":
        transport, rule = "Socket", f"NCCL_NET={net}"
    elif disable:
        transport, rule = "Socket", f"NCCL_IB_DISABLE={env['NCCL_IB_DISABLE']}"
    elif used:
        transport, rule = "IB", f"NCCL_IB_HCA={hca_text}" if hca_text is not None else "default: every active port"
    else:
        transport = "Socket"
        if not devices:
            rule = "no RDMA device"
        elif hca_text is not None and any(p["state"] == "ACTIVE" for d in devices for p in d["ports"]):
            rule = f"NCCL_IB_HCA={hca_text} matches no active port"
        else:
            rule = "no active RDMA port"
    if net and net.lower() == "ib" and not used:
        transport = "none"
        error = (
            f"NCCL_NET={net} but IB has no usable port ({rule}): NCCL fails with 'Failed to initialize any NET plugin'"
        )
    return {
        "devices": devices,
        "transport": transport,
        "rule": rule,
        "hca": hca_text,
        "used": used,
        "gid_index": gid_index,
        "error": error,
    }
