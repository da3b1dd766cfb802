"""Plain-text table and JSON. Standard library only: preflight participants print these on the
launch path of every rank, where importing a rendering library would cost start-up time."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from validator.documents import LayoutDoc
from validator.model import Finding, Report, Severity
from validator.report.options import RenderOptions
from validator.targets import fold_hosts, fold_ranks

PART_MAX = 1000  # characters of one list in a table line (the JSON report keeps every name)
COLOURS = {Severity.ERROR: "\033[31m", Severity.WARNING: "\033[33m", Severity.INFO: "\033[36m"}
RESET = "\033[0m"


def visible(text: object) -> str:
    """``text`` as every human-facing format shows it: what a node, a log or the network wrote
    may hold control characters (ESC recolours or rewrites a terminal, CR and BS overprint a
    line, XML 1.0 forbids most of them even as entities) or bidi overrides that reorder what is
    read; each such character shows as its escape (``\\x1b``, ``\\u202e``). The JSON report keeps
    the text exact."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def fold(findings: list[Finding]) -> list[Finding]:
    """Identical findings (same code, values and fix) become one row with hosts and ranks merged:
    100,000 ranks with one bad setting print as one row."""
    rows: dict[tuple[Any, ...], Finding] = {}
    for f in findings:
        key = (f.code, f.severity, f.title, f.expected, f.actual, f.fix)
        if key in rows:
            row = rows[key]
            row.ranks = sorted(set(row.ranks) | set(f.ranks))
            row.hosts = list(dict.fromkeys(row.hosts + f.hosts))
        else:
            rows[key] = dataclasses.replace(f)
    return list(rows.values())


def where(f: Finding) -> str:
    parts = []
    if f.hosts:
        parts.append(bounded(visible(fold_hosts(f.hosts))))
    if f.ranks:
        parts.append(f"rank {bounded(fold_ranks(f.ranks))}")
    return " · ".join(parts) or "job"


def bounded(text: str) -> str:
    """``text`` as a table shows it: a folded list of 1,250 scattered hosts or ranks is 10 KB that
    no one reads on a terminal, and a preflight verdict carries the table to every node; the JSON
    report names them all."""
    if len(text) <= PART_MAX:
        return text
    return f"{text[:PART_MAX]}... ({len(text) - PART_MAX:,} more characters in the JSON report)"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def summary(report: Report) -> str:
    """The headline: findings per severity, targets without facts and input errors (a report
    with none of these says "no findings"), then who was checked."""
    counts = {s: sum(1 for f in report.findings if f.severity == s) for s in Severity}
    parts = [_plural(n, s.label) for s, n in sorted(counts.items(), reverse=True) if n]
    if report.outcomes:
        parts.append(f"{len({o.target for o in report.outcomes})} without facts")
    if report.input_errors:
        parts.append(_plural(len(report.input_errors), "input error"))
    hosts = len(report.hosts)
    where = f" on {hosts} host{'s' if hosts != 1 else ''}" if hosts else ""  # logs may name no host
    return f"{', '.join(parts) or 'no findings'} — {_plural(report.participants, 'participant')}{where}"


def render_table(report: Report, options: RenderOptions) -> str:
    colour, verdict = options.colour, options.verdict
    v = visible  # every field: what the world wrote reaches it (names, values, log lines)
    out = [f"{v(report.title)}: {summary(report)}"]
    if report.scan is not None and report.scan["net_check"] is not None:
        out.append(report.scan["net_check"]["line"])  # ours: counts and figures, nothing a node wrote
    if report.scan is not None and (probed := report.scan.get("probes")) is not None:
        out.append(v(probed["line"]))  # names nodes
    if report.layout is not None:
        out += layout_lines(report.layout)
    for err in report.input_errors:
        out.append(f"INPUT   {v(err)}")
    for o in report.outcomes:
        out.append(f"{v(o.status.upper()) + ' ':<8}{bounded(v(o.target))}: {bounded(v(o.detail))}")
    for f in fold(report.findings):
        sev = f.severity.name
        sev = f"{COLOURS[f.severity]}{sev:<7}{RESET}" if colour else f"{sev:<7}"
        out.append(f"{sev} {v(f.code):<7} {v(f.title)} — {where(f)}")
        out.append(f"        {v(f.message)}")
        if f.expected is not None or f.actual is not None:
            out.append(f"        expected {v(f.expected)}, got {v(f.actual)}")
        if f.fix:
            out.append(f"        fix:    {v(f.fix)}")
        if f.verify:
            out.append(f"        verify: {v(f.verify)}")
    if verdict:
        out += [v(line) for line in verdict.split("\n")]
    section = report.scan if report.scan is not None else report.preflight
    if section is not None and (excluded := section.get("exclude")):
        from validator.probes.exclude import lines

        out += [v(line) for line in lines(excluded)]
    return "\n".join(out) + "\n"


def layout_lines(doc: LayoutDoc) -> list[str]:
    """``layout: megatron (argv), 16 ranks: tp=8 cp=1 pp=2 dp=1``, then a line per kind of group."""
    degrees = " ".join(f"{k}={n}" for k, n in doc["degrees"].items() if k in ("tp", "cp", "pp", "dp", "ep"))
    out = [f"layout: {visible(doc['framework'])} ({bounded(visible(doc['source']))}), {doc['world']} ranks: {degrees}"]
    for kind, g in doc["groups"].items():
        span = f", {g['spanning']} on several hosts" if g["spanning"] else ""
        more = f"; ... {g['count'] - 2} more" if g["count"] > 2 else ""
        out.append(
            f"        {kind}: {g['count']} groups of {g['size']}{span}: {'; '.join(map(visible, g['shown'][:2]))}{more}"
        )
    return out


def render_json(report: Report, options: RenderOptions) -> str:
    return json_text(report.to_json())


def json_text(doc: dict[str, Any]) -> str:
    """The one JSON writer of reports (check, scan, diagnose, preflight, node-check): checked
    against docs/schema when VALIDATOR_SELF_CHECK=1, indented, one trailing newline."""
    from validator.schema import self_check

    self_check(doc, "report")
    return json.dumps(doc, indent=2) + "\n"


def render_facts(f: Any) -> str:
    """A person's view of one node's facts (`validator probe` without --json)."""
    launch, net, sw, gpus, sysf = f["launch"], f["network"], f["software"], f["gpus"], f["system"]
    src = launch["sources"]
    lines = [
        f"host {f['host']} (hostname {f['hostname']}, pid {f['pid']}, probe {f['probe_ms']:.0f} ms)",
        f"launcher {launch['launcher']} ({launch['mode']} mode)",
    ]
    for key in (
        "rank",
        "local_rank",
        "world_size",
        "local_world_size",
        "node_rank",
        "nnodes",
        "master_addr",
        "master_port",
        "rdzv_backend",
        "rdzv_endpoint",
        "rdzv_id",
        "job_id",
    ):
        if launch[key] is not None:
            lines.append(f"  {key:<17}{launch[key]!s:<24}{src.get(key, '')}")
    m = net["master"]
    if m:
        res = ", ".join(m["resolved"]) or f"unresolved ({m['error']})"
        extra = " loopback" if m["loopback"] else " (this node)" if m["local"] else ""
        lines.append(f"master {m['addr']} -> {res}{extra}; route via {m['route_dev'] or '?'}")
        if m["port_free"] is not None:
            lines.append(f"  port {m['port']}: {'free' if m['port_free'] else 'IN USE by ' + str(m['port_owner'])}")
    lines.append(
        f"NCCL would use {', '.join(net['nccl']['ifaces']) or 'nothing'} ({net['nccl']['rule']})"
        + (f" — {net['nccl']['error']}" if net["nccl"]["error"] else "")
    )
    lines.append(
        f"Gloo would use {net['gloo']['addr']} ({net['gloo']['rule']})"
        + (f" — {net['gloo']['error']}" if net["gloo"]["error"] else "")
    )
    for i in net["interfaces"]:
        state = "up" if i["up"] and i["running"] else "down"
        lines.append(
            f"  {i['name']:<10}{state:<5}mtu {i['mtu']!s:<6}{' '.join(i['addrs'])}{' (virtual)' if i['virtual'] else ''}"
        )
    if gpus["devices"]:
        lines.append(
            f"GPUs ({gpus['source']}): {len(gpus['devices'])} x {gpus['devices'][0]['name']}, driver {gpus['driver']}, CUDA {gpus['cuda']}"
        )
        if gpus["visible"] is not None:
            lines.append(
                f"  visible: {len(gpus['visible'])}" + (f" — {gpus['visible_error']}" if gpus["visible_error"] else "")
            )
    else:
        lines.append("GPUs: none (a CPU node)")
    lines.append(f"python {sw['python']}, torch {sw['torch']}, torch CUDA {sw['torch_cuda']}, NCCL {sw['nccl']}")
    lines.append(
        f"/dev/shm {(sysf['shm_bytes'] or 0) >> 20} MiB, memlock {sysf['memlock_soft']}, nofile {sysf['nofile_soft']}, somaxconn {sysf['somaxconn']}"
    )
    for k, v in f["errors"].items():
        lines.append(f"error in {k}: {v}")
    return "\n".join(map(visible, lines)) + "\n"
