"""`validator scan` of many loopback "hosts" behind real OpenSSH sshds: scale, sshd's default
MaxStartups, Ctrl-C, progress on a terminal, and output files."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import VALIDATOR, Sshd
from tests.scan.conftest import GOOD, HANG, ScanSshd, expand_hosts, foreground, run_scan, scan_env

pytestmark = [pytest.mark.root]


@pytest.mark.slow
def test_scan_of_50_loopback_hosts(sshd_loopback: Sshd, tmp_path: Path) -> None:
    hosts = [f"127.0.7.{i}" for i in range(1, 51)]
    drain = tmp_path / "drain.txt"
    drain.write_text("stale\n")
    run = run_scan("127.0.7.[1-50]", "-F", str(sshd_loopback.config), "--drain-list", str(drain))
    assert run.rc == 0, run.err
    assert run.doc is not None
    assert sorted(run.hosts) == sorted(hosts)
    assert run.doc["participants"] == 50 and run.doc["outcomes"] == []
    assert run.doc["scan"] == {**run.doc["scan"], "transport": "ssh", "targets": 50, "reached": 50}
    # the hosts are one machine: no finding may single out some of them
    assert all(sorted(expand_hosts(f["hosts"])) in ([], sorted(hosts)) for f in run.doc["findings"]), run.doc[
        "findings"
    ]
    assert run.doc["drain"] == [] and drain.read_text() == ""
    assert run.err == ""  # not a terminal: no progress output


@pytest.mark.slow
def test_default_maxstartups_drops_are_retried(scan_sshd: ScanSshd, tmp_path: Path) -> None:
    """OpenSSH's default MaxStartups 10:30:100 drops handshakes beyond 10 at random; a fan-out
    of 64 still reaches every host."""
    cfg = scan_sshd.config(tmp_path / "ssh_config")
    run = run_scan("127.0.4.[1-60]", "-F", str(cfg), "--fanout", "64")
    assert run.doc is not None, run.err
    assert run.doc["outcomes"] == [] and len(run.hosts) == 60
    assert run.rc == 0


def test_ctrl_c_prints_what_was_gathered(scan_sshd: ScanSshd, tmp_path: Path) -> None:
    cfg = scan_sshd.config(tmp_path / "ssh_config")
    p = subprocess.Popen(
        [*VALIDATOR, "scan", ",".join([*GOOD, HANG]), "-F", str(cfg), "--timeout", "120", "-v", "-f", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=scan_env(),
        preexec_fn=foreground,
    )
    try:
        assert p.stderr is not None
        seen, buf, deadline = 0, b"", time.monotonic() + 120
        while seen < len(GOOD) and time.monotonic() < deadline:  # the good hosts answered
            ready, _, _ = select.select([p.stderr], [], [], 1)
            if ready:
                chunk = os.read(p.stderr.fileno(), 4096)
                assert chunk, "the scan ended before it was interrupted"
                buf += chunk
                seen = buf.count(b": ok\n")
        assert seen == len(GOOD), buf.decode()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, err.decode()
    doc = json.loads(out)
    assert sorted(expand_hosts(doc["hosts"])) == sorted(GOOD)
    assert doc["outcomes"] == [
        {"target": HANG, "status": "interrupted", "detail": "the scan was interrupted before this host answered"}
    ]
    assert doc["scan"]["interrupted"] is True
    assert b"Traceback" not in err


def test_progress_bar_goes_to_a_terminal_on_stderr_and_json_alone_to_stdout(
    scan_sshd: ScanSshd, tmp_path: Path
) -> None:
    cfg = scan_sshd.config(tmp_path / "ssh_config")
    leader, follower = pty.openpty()
    try:
        p = subprocess.Popen(
            [*VALIDATOR, "scan", ",".join(GOOD), "-F", str(cfg), "-f", "json"],
            stdout=subprocess.PIPE,
            stderr=follower,
            env={**scan_env(), "COLUMNS": "100", "TERM": "xterm"},
        )
        os.close(follower)
        shown = b""
        while True:  # until the child closes the terminal (EOF / EIO); bounded by the scan's own timeouts
            ready, _, _ = select.select([leader], [], [], 60)
            if not ready:
                break
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
        out, _ = p.communicate(timeout=60)
    finally:
        os.close(leader)
    assert p.returncode == 0
    assert json.loads(out)["participants"] == len(GOOD)  # stdout: the JSON alone
    assert b"scan" in shown and b"failed" in shown  # the bar: hosts done and failed


def test_output_file_and_drain_list(scan_sshd: ScanSshd, tmp_path: Path) -> None:
    from tests.scan.conftest import CLOSED

    cfg = scan_sshd.config(tmp_path / "ssh_config")
    report, drain = tmp_path / "report.xml", tmp_path / "drain.txt"
    p = subprocess.run(
        [*VALIDATOR, "scan", f"{GOOD[0]},{CLOSED}", "-F", str(cfg), "-f", "junit", "-o", str(report),
         "--drain-list", str(drain)],
        capture_output=True, text=True, env=scan_env(), timeout=120, check=False,
    )  # fmt: skip
    assert p.returncode == 3 and p.stdout == "", p.stderr
    assert drain.read_text() == f"{CLOSED}\n"
    import xml.etree.ElementTree as ET

    suite = ET.fromstring(report.read_text())
    errors = [c for c in suite.iter("testcase") if c.find("error") is not None]
    assert [c.get("name") for c in errors] == [CLOSED]
    assert errors[0].find("error").get("type") == "unreachable"  # type: ignore[union-attr]


@pytest.mark.parametrize("mistake", ["wrong port", "names that do not resolve"])
def test_scan_side_failure_is_exit_2_and_drains_nothing(sshd_loopback: Sshd, tmp_path: Path, mistake: str) -> None:
    """Every host failing the same way on the scanner's side is the scan failing: piping the
    drain list into scontrol must not drain the partition."""
    cfg = tmp_path / "ssh_config"
    text = sshd_loopback.config.read_text()
    hosts = "127.0.9.[1-6]"
    if mistake == "wrong port":  # a forgotten -F or Port: nothing listens on port 1
        text = "\n".join(line for line in text.splitlines() if not line.strip().lower().startswith("port"))
        text = "Port 1\n" + text
    else:
        hosts = "cv-no-such-node[1-6].invalid"
    cfg.write_text(text)
    drain = tmp_path / "drain.txt"
    drain.write_text("stale\n")
    run = run_scan(hosts, "-F", str(cfg), "--drain-list", str(drain), "--connect-timeout", "5")
    assert run.rc == 2, run.err
    assert drain.read_text() == "" and run.doc is not None and run.doc["drain"] == []
    line = [ln for ln in run.err.splitlines() if "the scan failed, not the nodes: 6 of 6 hosts" in ln]
    assert line and ("SSH port" if mistake == "wrong port" else "name resolution") in line[0], run.err


@pytest.mark.parametrize("transport", [(), ("--openssh",)], ids=["ssh", "openssh"])
def test_host_colon_port_targets_reach_that_port(
    sshd_loopback: Sshd, tmp_path: Path, transport: tuple[str, ...]
) -> None:
    """`HOST:PORT` (a hostlist too) is that host on that port, whatever ssh config's Port says; a
    port out of range is one line and exit 2, before any connection."""
    cfg = tmp_path / "ssh_config"
    cfg.write_text(sshd_loopback.config.read_text().replace(f"Port {sshd_loopback.port}", "Port 1"))
    run = run_scan(*transport, f"127.0.7.[1-2]:{sshd_loopback.port}", "-F", str(cfg), "--timeout", "20")
    assert run.rc == 0, run.err
    assert run.doc is not None and run.doc["scan"]["reached"] == 2 and run.doc["outcomes"] == [], run.err
    closed = run_scan(*transport, "127.0.7.1", "-F", str(cfg), "--timeout", "20")  # config's port: nothing there
    assert closed.doc is not None and closed.doc["scan"]["reached"] == 0
    bad = run_scan(*transport, "127.0.7.1:70000", "-F", str(cfg))
    assert (
        bad.rc == 2 and bad.err.strip() == "validator: error: target '127.0.7.1:70000': port 70000 is not in 1-65535"
    ), bad.err
