"""What the preflight says and writes differently in a Kubernetes pod (an init container):
why the master's name does not resolve, and the one-line summary for the termination log."""

from __future__ import annotations

import sys

from validator.facts.k8s import POD_LAUNCHERS

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from typing import Any

    from validator.model import Facts

TERMINATION_LOG = "/dev/termination-log"
SUMMARY_MAX = 1024  # the kubelet keeps at most 4096 bytes of a termination message


def in_pod(facts: Facts) -> bool:
    """The kubelet sets KUBERNETES_SERVICE_HOST in every container; the launcher tells too."""
    return "KUBERNETES_SERVICE_HOST" in facts["env"] or facts["launch"]["launcher"] in POD_LAUNCHERS


def unresolved_hint(host: str, facts: Facts) -> str:
    """Why ``host`` may never have resolved, naming the headless Service it belongs to."""
    if not in_pod(facts):
        return f"; {host} never resolved here: check its DNS entry or /etc/hosts (getent ahosts {host})"
    labels = host.split(".")
    env = facts["env"]
    if len(labels) == 1:
        owner = (
            f"{host} is a Service name: Service {host} must be headless, select the master pod only and set it "
            f"(the per-replica Services the Kubeflow training-operator creates, <job>-master-0, do not)"
        )
    else:
        ns = labels[2] if len(labels) > 2 and labels[2] != "svc" else env.get("POD_NAMESPACE", "")
        where = labels[1] + (f" in namespace {ns}" if ns else "")
        if "LWS_LEADER_ADDRESS" in env:
            owner = (
                f"LeaderWorkerSet creates Service {where} with it set: check that the Service exists and that "
                f"the leader pod {labels[0]} was created"
            )
        else:
            owner = (
                f"{host} is pod hostname {labels[0]} under the headless Service {where}: set it on Service "
                f"{labels[1]} (JobSet: spec.network.publishNotReadyAddresses) and check that the pod's subdomain "
                f"is {labels[1]}"
            )
    return (
        f"; {host} never resolved: init containers run before any pod is Ready, and a headless Service "
        f"publishes not-ready pods only with `publishNotReadyAddresses: true`; {owner}"
    )


def summary(report: dict[str, Any], code: int, text: str) -> str:
    """One line: the verdict, then the most severe findings and the missing participants.
    ``report`` is the JSON report (what every participant receives)."""
    verdict = text.rstrip("\n").rsplit("\n", 1)[-1].strip() or f"preflight exit {code}"
    parts = [verdict]
    parts += [f"{f['code']} {f['message']}" for f in report.get("findings", [])[:3]]
    parts += [f"{o['target']} {o['status']}: {o['detail']}" for o in report.get("outcomes", [])[:2]]
    line = " | ".join(" ".join(p.split()) for p in parts)
    return line if len(line) <= SUMMARY_MAX else line[: SUMMARY_MAX - 3] + "..."


def write_termination_log(path: str, report: dict[str, Any], code: int, text: str) -> None:
    """`kubectl describe pod` shows this as the init container's Message. A failure to write it
    never changes the verdict."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(summary(report, code, text) + "\n")
    except OSError as e:
        print(f"validator: cannot write the termination log {path}: {e.strerror}", file=sys.stderr)
