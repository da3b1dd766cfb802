"""--net-check: prove that the interfaces NCCL (or Gloo) would use can reach each other.

Each participant listens on the address its library would advertise; the coordinator hands
every participant its ring neighbour's and the master's listener; each connects and reports.
A failed pair names both ends and their interfaces (PRE005).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from validator.model import Facts, Finding

CONNECT_TIMEOUT_S = 3.0


def advertised(facts: Facts) -> tuple[str, str | None, str] | None:
    """(address, interface, library) this node's collectives would use."""
    net = facts["network"]
    uses_nccl = bool(facts["gpus"]["devices"]) or any(k.startswith("NCCL_") for k in facts["env"])
    sel = net["nccl"] if uses_nccl else net["gloo"]
    if not sel["addr"]:
        return None
    return sel["addr"].split("/")[0], next(iter(sel["ifaces"]), None), "NCCL" if uses_nccl else "Gloo"


class Listener:
    """Accepts connections on (addr, ephemeral port) until closed; answers each with b"ok"."""

    def __init__(self, addr: str, iface: str | None) -> None:
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind((addr, 0))
        self.sock.listen(128)
        self.sock.settimeout(0.2)
        self.addr, self.port, self.iface = addr, int(self.sock.getsockname()[1]), iface
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        deadline = time.monotonic() + 3600  # bounded even if nobody closes us
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            try:
                conn.sendall(b"ok")
            except OSError:
                pass
            finally:
                conn.close()

    def describe(self) -> list[Any]:
        return [self.addr, self.port, self.iface]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(1.0)
        self.sock.close()


def open_listener(facts: Facts) -> Listener | None:
    adv = advertised(facts)
    if adv is None:
        return None
    try:
        return Listener(adv[0], adv[1])
    except OSError:
        return None  # the address is not bindable here: the ring probe towards us reports it


def probe(targets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Connect to each target; one result per target."""
    results = []
    for t in targets:
        t0 = time.monotonic()
        res = dict(t)
        if t.get("addr") is None:
            res["ok"], res["error"], res["ms"] = False, "no listener", 0.0
            results.append(res)
            continue
        try:
            with socket.create_connection((t["addr"], int(t["port"])), timeout=CONNECT_TIMEOUT_S) as s:
                s.settimeout(CONNECT_TIMEOUT_S)
                res["ok"] = s.recv(2) == b"ok"
                res["error"] = None if res["ok"] else "no answer from the listener"
        except OSError as e:
            res["ok"], res["error"] = False, (e.strerror or str(e) or type(e).__name__)
        res["ms"] = round((time.monotonic() - t0) * 1000, 1)
        results.append(res)
    return results


def plan_ring(nodes: list[tuple[Any, str, list[Any] | None]]) -> dict[Any, list[dict[str, Any]]]:
    """nodes: (id, host, listener) in rank order. Each probes its ring neighbour, and the middle
    ones the first node too (the first is the master; the last one's neighbour is the first)."""
    plan: dict[Any, list[dict[str, Any]]] = {i: [] for i, _, _ in nodes}
    if len(nodes) < 2:
        return plan
    for n, (i, _, _) in enumerate(nodes):
        targets = [("ring", nodes[(n + 1) % len(nodes)])]
        if 0 < n < len(nodes) - 1:
            targets.append(("master", nodes[0]))
        for role, (_, host, listen) in targets:
            addr, port, iface = listen if listen else (None, None, None)
            plan[i].append({"host": host, "addr": addr, "port": port, "iface": iface, "role": role})
    return plan


def findings(results: dict[Any, tuple[str, list[Any] | None, list[dict[str, Any]]]]) -> list[Finding]:
    """results: id -> (host, our listen, probe results). PRE005 for each failed pair."""
    from validator.preflight.findings import finding  # the check registry: coordinator only

    out = []
    for _, (host, listen, rows) in results.items():
        src = f"{host} ({listen[2]} {listen[0]})" if listen else host
        for r in rows:
            if r.get("ok"):
                continue
            if r.get("addr") is None:
                msg = f"{r['host']} has no usable listener address (its NCCL/Gloo interface could not be bound)"
            else:
                msg = f"{src} cannot reach {r['host']} ({r.get('iface')} {r['addr']}:{r['port']}): {r.get('error')}"
            out.append(finding("PRE005", msg, hosts=list(dict.fromkeys([host, r["host"]])), expected="connected",
                               actual=str(r.get("error") or "no listener"),
                               verify="validator preflight --net-check ...   # rerun: no PRE005"))  # fmt: skip
    return out


def summary(results: dict[Any, tuple[str, list[Any] | None, list[dict[str, Any]]]]) -> str:
    """What the verdict line says the net check did: "net-check: 6 links ok"."""
    rows = [r for _, _, got in results.values() for r in got]
    bad = sum(1 for r in rows if not r.get("ok"))
    if not rows:
        return "net-check: no links to test"
    return f"net-check: {len(rows)} links ok" if not bad else f"net-check: {bad} of {len(rows)} links failed"
