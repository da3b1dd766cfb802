"""The scan's policy, apart from how any report looks: which nodes to take out of service (the
drain list) and when the scan itself failed rather than the nodes. Read by `validator scan`
(scan.py) and, for a report that carries no drain list of its own, by the HTML renderer."""

from __future__ import annotations

import re
from typing import Any

from validator.model import Report, Severity

NOT_A_NODE_PROBLEM = ("auth", "hostkey", "interrupted")  # the scanner's credentials or patience


def _natural(host: str) -> list[Any]:
    return [int(p) if p.isdecimal() else p for p in re.split(r"(\d+)", host)]


def drain_hosts(report: Report, fail_on: Severity | None = Severity.ERROR) -> list[str]:
    """Nodes to take out of service: those that gave no facts for a node reason (unreachable,
    timeout, no python, unparsed, error), and those a finding at ``fail_on`` or worse names.
    Findings that name every scanned node are about the cluster or the profile, not a node, and
    auth / host key outcomes are about the person scanning: neither puts a node on the list."""
    everyone = set(report.hosts)
    # a host that gave no facts drains only while its peers answer: when none does, the scan failed
    out = [o.target for o in report.outcomes if o.status not in NOT_A_NODE_PROBLEM] if everyone else []
    for f in report.findings:
        if fail_on is None or f.severity < fail_on or (len(everyone) > 1 and set(f.hosts) >= everyone):
            continue
        out += [h for h in f.hosts if h in everyone]
    return sorted(set(out), key=_natural)


SCAN_SIDE_HINTS = {
    "auth": "the user, key and ssh-agent of this machine (-l/--user, -F)",
    "hostkey": "known_hosts on this machine (--accept-new-host-keys for new nodes)",
    "resolve": "name resolution on this machine (/etc/hosts, DNS, or an ssh_config with -F)",
    "refused": "the SSH port and config (-F; Port in ssh_config)",
    "timeout": "the network path and firewall from this machine (or --connect-timeout)",
    "no-python": "--python: the interpreter the nodes should run the agent with",
}


KUBECTL_HINTS = {  # the same kinds, when kubectl is the carrier: its context and the API server, not SSH
    "auth": "kubectl's credentials for the context (--context; kubectl auth can-i create pods/exec)",
    "resolve": "the kubeconfig's server address (--context; kubectl cluster-info)",
    "refused": "the API server the context points at (--context; kubectl cluster-info)",
    "timeout": "the API server and the pods' readiness (--context; kubectl get pods)",
    "no-python": "--python: the interpreter in the pods' image",
}


def scan_failure(report: Report, targets: int, transport: str = "ssh") -> str | None:
    """The scan itself failed, not the nodes: most hosts failed the same way on the scanner's
    side (credentials, config, name resolution, a refused or timed-out SSH port). None when the
    outcomes look like node problems."""
    kinds: dict[str, int] = {}
    for o in report.outcomes:
        detail = o.detail.lower()
        kind = o.status if o.status in ("auth", "hostkey", "no-python") else (
            "resolve" if "resolve" in detail else "refused" if "refused" in detail
            else "timeout" if o.status == "unreachable" and "timeout" in detail else "")  # fmt: skip
        if kind:
            kinds[kind] = kinds.get(kind, 0) + 1
    if not kinds or targets < 2:  # one host alone: incomplete (exit 3), but nothing to drain either
        return None
    kind, n = max(kinds.items(), key=lambda kv: kv[1])
    if n * 2 <= targets:
        return None
    example = next(o.detail for o in report.outcomes if kind == o.status or kind in o.detail.lower())
    hint = (KUBECTL_HINTS if transport == "kubectl" else {}).get(kind) or SCAN_SIDE_HINTS[kind]
    return f"the scan failed, not the nodes: {n} of {targets} hosts: {example[:200]}; check {hint}"
