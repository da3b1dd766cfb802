"""The nodes to take out, in each launcher's own form: Slurm (``--exclude``, a relaunch line on
the rest, the admins' drain command), a hostfile of the rest for deepspeed and mpirun, and for
Kubernetes ``kubectl cordon`` / ``taint`` commands and a node anti-affinity snippet. Names came
from the nodes: every one is shell-quoted in a command, and the renderers show them through
``visible``."""

from __future__ import annotations

import shlex

from validator.documents import ExcludeDoc
from validator.targets import fold_hosts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from validator.model import Finding

TAINT = "validator.io/excluded=true:NoSchedule"
SLOW_CODES = ("NET105", "PRB001", "PRB002")  # slow nodes: warnings (the job runs, slowly), taken out too


def slow_hosts(findings: list[Finding]) -> set[str]:
    """The hosts the slow-node findings (SLOW_CODES) name."""
    return {h for f in findings if f.code in SLOW_CODES for h in f.hosts}


def exclusion(base: list[str], out: list[str], slots: dict[str, int], pods: bool = False) -> ExcludeDoc:
    """``out`` taken out of ``base`` (the allocation's nodes, or the scanned hosts). ``slots``:
    ranks per node for the hostfile (its GPUs; 1 without). ``pods``: the names are pods (``--k8s``),
    whose nodes kubectl looks up."""
    gone = set(out)
    keep = [h for h in base if h not in gone]
    named, rest = fold_hosts(out), fold_hosts(keep)
    q = shlex.quote
    if pods:
        node = [f"\"$(kubectl get pod {q(p)} -o jsonpath='{{.spec.nodeName}}')\"" for p in out]
    else:
        node = [q(h) for h in out]
    values = "".join(f"\n              - {h!r}" for h in out) if not pods else "\n              - NODE   # kubectl get pod POD -o jsonpath='{.spec.nodeName}'"  # fmt: skip
    affinity = (
        "affinity:\n  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n      nodeSelectorTerms:\n"
        "        - matchExpressions:\n            - key: kubernetes.io/hostname\n              operator: NotIn\n"
        f"              values:{values}\n"
    )
    hosts = bool(out) and not pods  # pods are no Slurm nodes and no hostfile's hosts: only their nodes' forms
    return {
        "hosts": list(out),
        "keep": keep,
        "slurm": {
            "exclude": f"--exclude={named}" if hosts else "",
            "nodelist": rest if not pods else "",
            "nodes": len(keep),
            "srun": f"srun --nodes={len(keep)} --nodelist={q(rest)} COMMAND" if hosts and keep else "",
            "sbatch": f"sbatch --exclude={q(named)} JOB_SCRIPT" if hosts else "",
            "drain": f'scontrol update nodename={q(named)} state=drain reason="validator scan"' if hosts else "",
        },
        "hostfile": [f"{h} slots={max(1, slots.get(h, 1))}" for h in keep] if not pods else [],
        "kubernetes": {
            "cordon": [f"kubectl cordon {n}" for n in node],
            "taint": [f"kubectl taint nodes {n} {TAINT}" for n in node],
            "affinity": affinity if out else "",
        },
    }


def lines(doc: ExcludeDoc) -> list[str]:
    """The table's lines: what to take out and how, one form a line."""
    if not doc["hosts"]:
        return []
    s, k = doc["slurm"], doc["kubernetes"]
    out = [f"exclude: {fold_hosts(doc['hosts'])} ({len(doc['hosts'])} of {len(doc['hosts']) + len(doc['keep'])})"]
    if s["sbatch"]:
        out += [
            f"  slurm:   {s['sbatch']}",
            *([f"  relaunch: {s['srun']}"] if s["srun"] else []),
            f"  drain:   {s['drain']}",
        ]
    if doc["hostfile"]:
        out += [
            f"  hostfile (deepspeed, mpirun): {', '.join(doc['hostfile'][:8])}"
            + (" ..." if len(doc["hostfile"]) > 8 else "")
        ]
    out += [f"  kubernetes: {k['cordon'][0]}" + (f" (and {len(k['cordon']) - 1} more)" if len(k["cordon"]) > 1 else "")]
    return out
