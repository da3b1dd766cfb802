"""Every transport behaves the same (validator.transports.Transport): the same `validator scan`
scenarios run against local, ssh and openssh (real sshd), slurm (real slurmctld/slurmd, inside salloc) and
kubectl. kubectl is the one fake part: no Kubernetes API server can run here, so the `kubectl`
on PATH is tests/k8s/kubectl, which answers `get pods` from a JSON file and runs `exec` inside
emulated pods (network, UTS and mount namespaces; tests/k8s/cluster.py).

Scenarios: a reached target gives facts; an unreachable one, one whose agent hangs past
--timeout, one without python3 and one that prints something else are each an outcome for that
target alone (never a traceback) while the others are still checked; Ctrl-C (SIGINT to the real
`validator scan` process) prints the partial report, exits 130, no traceback. A transport that
cannot have a scenario says why (skip)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import VALIDATOR, Slurm
from tests.k8s.cluster import Cluster, k8s_cluster  # noqa: F401  (the fixture)
from tests.scan.conftest import CLOSED, GARBAGE, GOOD, HANG, NO_PYTHON, ScanSshd, expand_hosts, scan_env
from validator.transports import Program
from validator.transports.local import Local
from validator.transports.table import TRANSPORTS as TABLE

pytestmark = [pytest.mark.root]
TRANSPORTS = list(TABLE)  # every transport of the table; one without a Rig in RIGS fails every scenario
STATUS = {"unreachable": "unreachable", "timeout": "timeout", "nopython": "no-python", "garbage": "unparsed"}

# Runs the scan, waits (bounded) for `ok` lines on its stderr and for a file, sends SIGINT; the
# scan's stdout and stderr go to files; exits with the scan's exit status. Under salloc for slurm.
DRIVER = """import os, select, signal, subprocess, sys, time
want, mark, out, err = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
p = subprocess.Popen(sys.argv[5:], stdout=open(out, "w"), stderr=subprocess.PIPE,
                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as in a foreground shell
buf, deadline = b"", time.monotonic() + 120
while (buf.count(b": ok") < want or (mark and not os.path.exists(mark))) and time.monotonic() < deadline:
    if select.select([p.stderr], [], [], 0.2)[0]:
        chunk = os.read(p.stderr.fileno(), 4096)
        if not chunk:
            break
        buf += chunk
p.send_signal(signal.SIGINT)
rest = p.stderr.read()
open(err, "wb").write(buf + rest)
sys.exit(p.wait(timeout=60))
"""


@dataclass
class Rig:
    """How one transport reaches good and odd targets."""

    name: str
    env: dict[str, str]
    good: list[str]  # the targets that answer in every scenario
    cases: dict[str, tuple[list[str], str]]  # scenario -> (scan arguments, the odd target)
    reached: list[str]  # scan arguments reaching the good targets alone
    hang_mark: str = ""  # a file the hanging target touches once it hangs
    wrap: list[str] = field(default_factory=list)  # what runs the scan (salloc)
    missing: dict[str, str] = field(default_factory=dict)  # scenario -> why this transport cannot have it


def _python(tmp: Path, name: str, body: str) -> str:
    """A python3 that misbehaves (on one node: ``body`` tests SLURMD_NODENAME)."""
    tmp.chmod(0o755)
    path = tmp / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def local_rig(request: pytest.FixtureRequest, tmp: Path) -> Rig:
    me, mark = socket.gethostname(), tmp / "hanging"
    hang = _python(tmp, "hang", f"touch {mark}\nexec sleep 300")
    garbage = _python(tmp, "garbage", "echo 'Welcome to the cluster'\ncat >/dev/null")
    cases = {
        "timeout": (["--local", "--python", hang, "--timeout", "3"], me),
        "nopython": (["--local", "--python", "/nonexistent/python3"], me),
        "garbage": (["--local", "--python", garbage], me),
        "ctrlc": (["--local", "--python", hang, "--timeout", "120"], me),
    }
    why = "one target, this machine, which is always reachable"
    return Rig("local", scan_env(), [], cases, ["--local"], str(mark), missing={"unreachable": why})


def ssh_rig(request: pytest.FixtureRequest, tmp: Path, name: str = "ssh", flag: tuple[str, ...] = ()) -> Rig:
    sshd: ScanSshd = request.getfixturevalue("scan_sshd")
    cfg = [*flag, "-F", str(sshd.config(tmp / "ssh_config")), "--timeout", "10"]
    good = GOOD[:2]

    def with_(odd: str, *extra: str) -> tuple[list[str], str]:
        return [",".join([*good, odd]), *cfg, *extra], odd

    cases = {"unreachable": with_(CLOSED), "timeout": with_(HANG, "--timeout", "3"), "nopython": with_(NO_PYTHON),
             "garbage": with_(GARBAGE), "ctrlc": with_(HANG, "--timeout", "120")}  # fmt: skip
    return Rig(name, scan_env(), good, cases, [",".join(good), *cfg])


def openssh_rig(request: pytest.FixtureRequest, tmp: Path) -> Rig:
    """The same sshd and scenarios as ssh, through the system ssh client."""
    return ssh_rig(request, tmp, "openssh", ("--openssh",))


def slurm_rig(request: pytest.FixtureRequest, tmp: Path) -> Rig:
    slurm: Slurm = request.getfixturevalue("slurm")
    mark = tmp / "hanging"
    odd = '[ "$SLURMD_NODENAME" = n2 ] && '

    def python(name: str, body: str) -> list[str]:
        return ["--slurm", "--python", _python(tmp, name, f'{odd}{{ {body}; }}\nexec python3 "$@"')]

    cases = {
        "timeout": ([*python("hang", f"touch {mark}; exec sleep 300"), "--timeout", "3"], "n2"),
        "nopython": (python("nopython", 'exec /nonexistent/python3 "$@"'), "n2"),
        "garbage": (python("garbage", "echo 'Welcome to the cluster'; cat >/dev/null; exit 0"), "n2"),
        "ctrlc": ([*python("hang2", f"touch {mark}; exec sleep 300"), "--timeout", "120"], "n2"),
    }
    why = "a node of a running allocation cannot be cut off without stopping the slurmd the other tests share"
    return Rig("slurm", {**scan_env(), "SLURM_CONF": str(slurm.conf)}, ["n1"], cases, ["--slurm"], str(mark),
               ["salloc", "-N2", "-w", "n1,n2", "--time=5"], {"unreachable": why})  # fmt: skip


def kubectl_rig(request: pytest.FixtureRequest, tmp: Path) -> Rig:
    cluster: Cluster = request.getfixturevalue("k8s_cluster")
    good = ["train-0", "train-1"]

    def pods(case: str, odd: str, *extra: str) -> tuple[list[str], str]:
        return ["--k8s", "-l", f"case-{case}", "-n", "ml", *extra], odd

    cases = {"unreachable": pods("unreachable", "gone-0"), "timeout": pods("timeout", "hang-0", "--timeout", "3"),
             "nopython": pods("nopython", "nopython-0"), "garbage": pods("garbage", "garbage-0"),
             "ctrlc": pods("timeout", "hang-0", "--timeout", "120")}  # fmt: skip
    cluster.started.unlink(missing_ok=True)
    return Rig("kubectl", cluster.env(), good, cases, ["--k8s", "-l", "case-ctrlc"], str(cluster.started))


RIGS: dict[str, Callable[[pytest.FixtureRequest, Path], Rig]] = {
    "local": local_rig, "ssh": ssh_rig, "slurm": slurm_rig, "kubectl": kubectl_rig, "openssh": openssh_rig,
}  # fmt: skip


@pytest.fixture(params=TRANSPORTS)
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Rig:
    if request.param == "slurm":
        request.applymarker(pytest.mark.slow)
    return RIGS[request.param](request, tmp_path)


def scan(rig: Rig, args: list[str]) -> tuple[int, dict[str, object] | None, str]:
    p = subprocess.run([*rig.wrap, *VALIDATOR, "scan", *args, "-f", "json"], capture_output=True, text=True,
                       env=rig.env, timeout=300, check=False)  # fmt: skip
    doc = json.loads(p.stdout) if p.stdout.strip().startswith("{") else None
    return p.returncode, doc, p.stderr


def test_reached_targets_give_facts(rig: Rig) -> None:
    rc, doc, err = scan(rig, rig.reached)
    assert doc is not None, err
    assert doc["scan"]["transport"] == rig.name  # type: ignore[index]
    assert doc["outcomes"] == [] and doc["participants"] >= max(1, len(rig.good)), err
    assert set(rig.good) <= set(expand_hosts(doc["hosts"]))  # type: ignore[arg-type]
    assert rc in (0, 1) and "Traceback" not in err


@pytest.mark.parametrize("case", list(STATUS))
def test_a_bad_target_is_an_outcome_for_it_alone(rig: Rig, case: str) -> None:
    if case in rig.missing:
        pytest.skip(f"{rig.name}: {rig.missing[case]}")
    args, odd = rig.cases[case]
    rc, doc, err = scan(rig, args)
    assert doc is not None, err
    outcomes = {o["target"]: o for o in doc["outcomes"]}  # type: ignore[attr-defined]
    assert list(outcomes) == [odd] and outcomes[odd]["status"] == STATUS[case], outcomes
    assert sorted(expand_hosts(doc["hosts"])) == sorted(rig.good)  # type: ignore[arg-type]
    assert rc == 3 and "Traceback" not in err


def test_ctrl_c_prints_the_partial_report(rig: Rig, tmp_path: Path) -> None:
    args, odd = rig.cases["ctrlc"]
    driver, out, err = tmp_path / "driver.py", tmp_path / "out.json", tmp_path / "err.txt"
    driver.write_text(DRIVER)
    tmp_path.chmod(0o755)
    if rig.hang_mark:  # the timeout scenario's hang touched it too: Ctrl-C would come before this one hangs
        Path(rig.hang_mark).unlink(missing_ok=True)
    p = subprocess.run([*rig.wrap, sys.executable, str(driver), str(len(rig.good)), rig.hang_mark, str(out), str(err),
                        *VALIDATOR, "scan", *args, "-v", "-f", "json"],
                       capture_output=True, text=True, env=rig.env, timeout=300, check=False)  # fmt: skip
    stderr = err.read_text() if err.exists() else p.stderr
    assert p.returncode == 130, stderr
    doc = json.loads(out.read_text())
    assert sorted(expand_hosts(doc["hosts"])) == sorted(rig.good)
    assert doc["outcomes"] == [
        {"target": odd, "status": "interrupted", "detail": "the scan was interrupted before this host answered"}
    ]
    assert doc["scan"]["interrupted"] is True and doc["scan"]["transport"] == rig.name
    assert "Traceback" not in stderr and "interrupted" in stderr


def test_an_interrupted_run_leaves_no_pipe_to_the_garbage_collector(tmp_path: Path) -> None:
    """Ctrl-C ends ``asyncio.run`` at once. A subprocess whose pipes are still open then (here a
    grandchild in its own session holds them, as a pod's process can) must be closed by the
    transport: left to the garbage collector, asyncio prints an "Event loop is closed" traceback
    (seen in CI on the kubectl Ctrl-C scenario)."""
    pidfile = tmp_path / "grandchild.pid"
    source = (
        "import subprocess, time\n"
        "p = subprocess.Popen(['sleep', '30'], start_new_session=True)\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(30)\n"
    )

    async def interrupted() -> None:
        run = asyncio.ensure_future(Local(sys.executable).run(Program(source, timeout=20), ["here"]))
        for _ in range(200):  # bounded: 10 s
            if pidfile.exists() and pidfile.read_text():
                break
            await asyncio.sleep(0.05)
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)

    unraisable: list[object] = []
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        asyncio.run(interrupted())
        gc.collect()
    finally:
        sys.unraisablehook = hook
        if pidfile.exists() and pidfile.read_text():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
    assert pidfile.exists(), "the program never started"
    assert unraisable == []


def test_ctrl_c_at_any_moment_of_a_run_leaves_nothing_to_the_garbage_collector(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Ctrl-C lands anywhere: while the programs start, while they run, while the first of them is
    being killed. Every process must be killed and reaped, its pipes closed, before ``asyncio.run``
    closes the loop, whatever the moment. (``asyncio.gather`` returned as soon as the first target's
    cleanup ended; ``asyncio.run`` then cancelled the others inside theirs: "Event loop is closed"
    tracebacks, and "Loop ... that handles pid N is closed" warnings, in CI's kubectl Ctrl-C scan.)"""
    source = "import time\ntime.sleep(30)\n"
    unraisable: list[object] = []
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        for step in range(30):  # cancelled 0, 5, ... 145 ms after the start: bounded, ~3 s in all

            async def interrupted(delay: float = step * 0.005) -> None:
                run = asyncio.ensure_future(Local(sys.executable).run(Program(source, timeout=20), ["a", "b", "c"]))
                await asyncio.sleep(delay)
                run.cancel()
                await asyncio.gather(run, return_exceptions=True)

            asyncio.run(interrupted())
            gc.collect()
    finally:
        sys.unraisablehook = hook
    assert unraisable == []
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text
