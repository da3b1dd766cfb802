"""kubectl transport: the pods a label selector matches (``kubectl get pods -o json``), each one
reached with ``kubectl exec -i POD -- python3 -c PROGRAM``, the program and its input on stdin
as over SSH. kubectl's own configuration decides where it goes: the current kubeconfig context
(``KUBECONFIG``, ``~/.kube/config``), or ``--context``.

A pod that is not Running is an outcome without an exec; kubectl failing to reach a pod (its own
``error:`` line, no "command terminated with exit code") makes it unreachable.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Protocol

from validator.errors import UserError
from validator.model import Outcome
from validator.transports import Program, Result, Transport, _tail
from validator.transports.local import Local

GET_TIMEOUT_S = 60.0
MAX_LIST = 64 << 20  # bytes of `kubectl get pods -o json` accepted


@dataclass(frozen=True)
class Pods:
    names: list[str]  # in the order kubectl listed them
    namespace: dict[str, str]  # pod -> its namespace
    phase: dict[str, str]  # pod -> status.phase


def _kubectl(context: str | None) -> list[str]:
    return ["kubectl", *([f"--context={context}"] if context else [])]


def list_pods(selector: str | None, namespace: str | None, context: str | None) -> Pods:
    """The pods ``selector`` matches; every way this fails is one line (exit 2)."""
    where = (
        f"-l {selector or '(none)'}"
        + (f" -n {namespace}" if namespace else "")
        + (f" --context {context}" if context else "")
    )
    argv = [*_kubectl(context), "get", "pods", "-o", "json"]
    argv += [f"--selector={selector}"] if selector else []
    argv += [f"--namespace={namespace}"] if namespace else []
    try:
        p = subprocess.run(argv, capture_output=True, timeout=GET_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise UserError("kubectl not found: --k8s needs kubectl on PATH") from None
    except subprocess.TimeoutExpired:
        raise UserError(f"kubectl get pods did not answer within {GET_TIMEOUT_S:g} s", where) from None
    if p.returncode != 0:
        lines = [ln.strip() for ln in p.stderr.decode(errors="replace").splitlines() if ln.strip()]
        raise UserError(f"kubectl get pods failed: {(lines or ['no error output'])[-1][:300]}", where)
    try:
        from validator.safejson import loads

        items = loads(p.stdout.decode(errors="replace"), max_bytes=MAX_LIST)["items"]
        pods = [(str(i["metadata"]["name"]), str(i["metadata"].get("namespace") or namespace or "default"),
                 str((i.get("status") or {}).get("phase") or "Unknown")) for i in items]  # fmt: skip
    except (ValueError, KeyError, TypeError) as e:
        raise UserError(f"kubectl get pods printed no pod list ({type(e).__name__}: {str(e)[:100]})", where) from None
    if not pods:
        raise UserError("no pods match", where)
    return Pods([n for n, _, _ in pods], {n: ns for n, ns, _ in pods}, {n: ph for n, _, ph in pods})


class Flags(Protocol):
    """What `validator scan --k8s` reads of the scan's options."""

    selector: str | None  # -l under --k8s, or --selector
    namespace: str | None
    context: str | None
    python: str
    fanout: int


def from_options(opts: Flags) -> tuple[Transport, list[str]]:  # mypy holds the class to Transport
    """The pods the selector matches, each through kubectl exec."""
    pods = list_pods(opts.selector, opts.namespace, opts.context)
    return Kubectl(pods, opts.context, opts.python, opts.fanout), pods.names


class Kubectl(Local):
    name = "kubectl"

    def __init__(self, pods: Pods, context: str | None = None, python: str = "python3", fanout: int = 64) -> None:
        super().__init__(python, fanout)
        self.pods = pods
        self.context = context

    def command(self, target: str) -> list[str]:
        ns = self.pods.namespace.get(target, "default")
        return [*_kubectl(self.context), "exec", "-i", f"--namespace={ns}", target, "--"]

    def skip(self, target: str) -> Outcome | None:
        phase = self.pods.phase.get(target, "Unknown")
        if phase == "Running":
            return None
        return Outcome(
            target, "unreachable", f"the pod is {phase}, not Running: kubectl exec needs a running container"
        )

    def outcome(self, target: str, out: str, err: str, rc: int | None, job: Program) -> Result:
        low = err.lower()
        if rc not in (0, None) and "command terminated with exit code" not in low and not out.strip():
            if "executable file not found" in low or ("no such file or directory" in low and self.python in err):
                return Outcome(target, "no-python", f"{self.python} not found in the pod ({_tail(err, 200)})")
            if low.lstrip().startswith(("error", "unable to")):
                return Outcome(target, "unreachable", f"kubectl exec: {_tail(err, 250)}")
        if rc == 126 and "executable file not found" in low:  # the container runtime's own message
            return Outcome(target, "no-python", f"{self.python} not found in the pod ({_tail(err, 200)})")
        if rc is not None and rc > 128 and "command terminated with exit code" in low:  # killed: 128 + signal
            rc = -(rc - 128)
        return super().outcome(target, out, err, rc, job)
