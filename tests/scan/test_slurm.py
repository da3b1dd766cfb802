"""`validator scan --slurm` inside a real allocation (slurmctld + 4 slurmd logical nodes): one
srun step gathers every node, each labelled by SLURMD_NODENAME."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import VALIDATOR, Slurm, Sshd
from tests.scan.conftest import expand_hosts, scan_env

pytestmark = [pytest.mark.root, pytest.mark.slow]


def salloc_scan(slurm: Slurm, nodes: int, *args: str) -> tuple[int, dict[str, Any] | None, str]:
    env = {**scan_env(), "SLURM_CONF": str(slurm.conf)}
    p = subprocess.run(
        ["salloc", f"-N{nodes}", "-w", f"n[1-{nodes}]", "--time=5", *VALIDATOR, "scan", "--slurm", "-f", "json", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    doc = json.loads(p.stdout) if p.stdout.strip().startswith("{") else None
    return p.returncode, doc, p.stderr


def test_scan_inside_salloc_gathers_every_node_through_srun(slurm: Slurm) -> None:
    rc, doc, err = salloc_scan(slurm, 4)
    assert doc is not None, err
    assert doc["scan"]["transport"] == "slurm"
    assert sorted(expand_hosts(doc["hosts"])) == slurm.nodes  # n1..n4, though every hostname is "vm"
    assert doc["outcomes"] == [] and doc["drain"] == []
    assert rc == 0, err


def test_slurm_nodes_selects_part_of_the_allocation(slurm: Slurm) -> None:
    rc, doc, err = salloc_scan(slurm, 4, "--slurm-nodes", "n[2-3]")
    assert doc is not None, err
    assert sorted(expand_hosts(doc["hosts"])) == ["n2", "n3"]
    assert rc == 0


def test_net_check_runs_listeners_and_probers_as_srun_steps(slurm: Slurm) -> None:
    rc, doc, err = salloc_scan(slurm, 4, "--net-check")
    assert doc is not None, err
    # node 0 probes the 3 others, nodes 1-3 their ring successor: 6 probes, all through
    net = doc["scan"]["net_check"]
    assert (net["nodes"], net["probes"], net["failed"]) == (4, 6, 0)
    assert [f for f in doc["findings"] if f["code"].startswith("NET1")] == []
    assert rc == 0


def test_missing_python_on_the_nodes_is_an_outcome_per_node(slurm: Slurm) -> None:
    rc, doc, err = salloc_scan(slurm, 2, "--python", "/nonexistent/python3")
    assert doc is not None, err
    outcomes = {o["target"]: o["status"] for o in doc["outcomes"]}
    assert outcomes == {"n1": "no-python", "n2": "no-python"}
    # every node "without python": the scanner's --python is wrong, not the nodes (exit 2, nothing drained)
    assert rc == 2 and doc["drain"] == [] and "--python" in doc["scan"]["failed"], err


def test_slurm_outside_an_allocation_is_a_usage_error(slurm: Slurm) -> None:
    p = subprocess.run(
        [*VALIDATOR, "scan", "--slurm"],
        capture_output=True, text=True, env={**scan_env(), "SLURM_CONF": str(slurm.conf)}, timeout=60, check=False,
    )  # fmt: skip
    assert p.returncode == 2
    assert p.stderr.startswith("validator: error: --slurm needs a SLURM allocation")
    assert "Traceback" not in p.stderr


def test_partition_targets_come_from_sinfo_and_are_scanned_over_ssh(
    slurm: Slurm, sshd_loopback: Sshd, tmp_path: Path
) -> None:
    """No allocation: the partition's nodes (n1..n4, addressed 127.0.0.11-14) over SSH."""
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        "".join(f"Host n{i}\n  HostName 127.0.0.{10 + i}\n" for i in range(1, 5)) + sshd_loopback.config.read_text()
    )
    p = subprocess.run(
        [*VALIDATOR, "scan", "--partition", "debug", "-F", str(cfg), "-f", "json"],
        capture_output=True, text=True, env={**scan_env(), "SLURM_CONF": str(slurm.conf)}, timeout=300, check=False,
    )  # fmt: skip
    doc = json.loads(p.stdout)
    assert doc["scan"]["transport"] == "ssh"
    assert sorted(expand_hosts(doc["hosts"])) == slurm.nodes, p.stderr
    assert p.returncode == 0


def test_unknown_partition_is_a_usage_error(slurm: Slurm) -> None:
    p = subprocess.run(
        [*VALIDATOR, "scan", "--partition", "nosuchpart"],
        capture_output=True, text=True, env={**scan_env(), "SLURM_CONF": str(slurm.conf)}, timeout=60, check=False,
    )  # fmt: skip
    assert p.returncode == 2 and "partition nosuchpart" in p.stderr and "Traceback" not in p.stderr


def hanging_python(tmp_path: Path, node: str) -> Path:
    """A python3 that hangs on one node only (before the agent can arm its watchdog)."""
    wrapper = tmp_path / "python3-hangs"
    wrapper.write_text(f'#!/bin/sh\n[ "$SLURMD_NODENAME" = {node} ] && exec sleep 300\nexec python3 "$@"\n')
    wrapper.chmod(0o755)
    tmp_path.chmod(0o755)
    return wrapper


def test_a_node_that_hangs_becomes_a_timeout_and_the_step_is_stopped(slurm: Slurm, tmp_path: Path) -> None:
    rc, doc, err = salloc_scan(slurm, 2, "--python", str(hanging_python(tmp_path, "n2")), "--timeout", "5")
    assert doc is not None, err
    assert expand_hosts(doc["hosts"]) == ["n1"]
    assert [(o["target"], o["status"]) for o in doc["outcomes"]] == [("n2", "timeout")]
    assert rc == 3


def test_ctrl_c_inside_salloc_reports_the_nodes_that_answered(slurm: Slurm, tmp_path: Path) -> None:
    """salloc runs a small driver that starts the scan, waits for n1's line, sends SIGINT."""
    driver = tmp_path / "driver.py"
    driver.write_text(
        "import os, select, signal, subprocess, sys, time\n"
        "p = subprocess.Popen(sys.argv[1:], stdout=open(os.environ['OUT'], 'w'), stderr=subprocess.PIPE,\n"
        "                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))\n"
        "buf, deadline = b'', time.monotonic() + 120\n"
        "while b'n1: ok' not in buf and time.monotonic() < deadline:\n"
        "    if select.select([p.stderr], [], [], 1)[0]:\n"
        "        chunk = os.read(p.stderr.fileno(), 4096)\n"
        "        if not chunk:\n"
        "            break\n"
        "        buf += chunk\n"
        "p.send_signal(signal.SIGINT)\n"
        "sys.exit(p.wait(timeout=60))\n"
    )
    out = tmp_path / "report.json"
    p = subprocess.run(
        ["salloc", "-N2", "-w", "n[1-2]", "--time=5", sys.executable, str(driver), *VALIDATOR, "scan", "--slurm", "-v",
         "-f", "json",
         "--python", str(hanging_python(tmp_path, "n2")), "--timeout", "120"],
        capture_output=True, text=True, env={**scan_env(), "SLURM_CONF": str(slurm.conf), "OUT": str(out)},
        timeout=300, check=False,
    )  # fmt: skip
    assert p.returncode == 130, p.stderr
    doc = json.loads(out.read_text())
    assert expand_hosts(doc["hosts"]) == ["n1"]
    assert [(o["target"], o["status"]) for o in doc["outcomes"]] == [("n2", "interrupted")]
    assert doc["scan"]["interrupted"] is True


def test_a_node_flooding_its_output_stops_the_step_as_too_much_output(slurm: Slurm, tmp_path: Path) -> None:
    """n2's python3 prints 50 MB on stdout (once n1 has answered) and hangs: the step is stopped
    when the output goes over its budget, an outcome that says so rather than a timeout after
    --timeout (200 s); n1's answer is kept."""
    wrapper = tmp_path / "python3-loud"
    done = tmp_path / "n1-done"  # n2 floods once n1 has answered (bounded wait: 120 s)
    wrapper.write_text(
        f'#!/bin/sh\nif [ "$SLURMD_NODENAME" = n2 ]; then\n  i=0\n'
        f"  while [ ! -e {done} ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done\n"
        '  head -c 50000000 /dev/zero | tr "\\0" x\n  exec sleep 300\nfi\n'
        f'python3 "$@"; rc=$?; touch {done}; exit $rc\n'
    )
    wrapper.chmod(0o755)
    tmp_path.chmod(0o755)
    rc, doc, err = salloc_scan(slurm, 2, "--python", str(wrapper), "--timeout", "200")
    assert doc is not None, err
    assert expand_hosts(doc["hosts"]) == ["n1"]
    outcomes = {o["target"]: o for o in doc["outcomes"]}
    assert list(outcomes) == ["n2"] and outcomes["n2"]["status"] == "unparsed", outcomes
    assert "too much output" in outcomes["n2"]["detail"] and "stdout" in outcomes["n2"]["detail"]
    assert rc == 3
