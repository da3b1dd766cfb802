"""`validator scan` over real OpenSSH sshds on loopback: every kind of bad host becomes an
outcome for that host alone (never a traceback), the good hosts are still checked, exit 3."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scan.conftest import (
    CHANGED,
    CLOSED,
    GARBAGE,
    GOOD,
    HANG,
    NO_ACCESS,
    NO_PYTHON,
    UNKNOWN_KEY,
    ScanRun,
    ScanSshd,
    run_scan,
)

pytestmark = [pytest.mark.root]


@pytest.fixture(scope="module")
def mixed(scan_sshd: ScanSshd, tmp_path_factory: pytest.TempPathFactory) -> ScanRun:
    """One scan of good hosts and every kind of bad one, with a short command timeout."""
    cfg = scan_sshd.config(tmp_path_factory.mktemp("cfg") / "ssh_config")
    return run_scan(
        ",".join([*GOOD, HANG, NO_PYTHON, NO_ACCESS, GARBAGE, CLOSED, CHANGED, UNKNOWN_KEY]),
        "-F", str(cfg), "--timeout", "10", "--connect-timeout", "20",  # generous: a loaded machine
    )  # fmt: skip


def test_good_hosts_are_checked_and_bad_ones_are_outcomes(mixed: ScanRun) -> None:
    run = mixed
    assert run.doc is not None, run.err
    assert run.rc == 3, run.err
    assert "Traceback" not in run.err
    assert sorted(run.hosts) == sorted(GOOD)
    statuses = {o["target"]: o["status"] for o in run.doc["outcomes"]}
    assert statuses == {
        HANG: "timeout",
        NO_PYTHON: "no-python",
        NO_ACCESS: "auth",
        GARBAGE: "unparsed",
        CLOSED: "unreachable",
        CHANGED: "hostkey",
        UNKNOWN_KEY: "hostkey",
    }


def test_outcome_details_say_what_to_do(mixed: ScanRun) -> None:
    run = mixed
    assert run.doc is not None, run.err
    detail = {o["target"]: o["detail"] for o in run.doc["outcomes"]}
    assert "CHANGED" in detail[CHANGED] and "ssh-keygen -R" in detail[CHANGED]
    assert "unknown host key" in detail[UNKNOWN_KEY] and "--accept-new-host-keys" in detail[UNKNOWN_KEY]
    assert "python3 not found" in detail[NO_PYTHON]
    assert "within 10 s" in detail[HANG]
    assert "connection refused" in detail[CLOSED]
    assert "Welcome to the cluster" in detail[GARBAGE]


def test_drain_list_holds_node_problems_not_credentials(mixed: ScanRun) -> None:
    drain = mixed.doc["drain"]
    assert sorted(drain) == sorted([HANG, NO_PYTHON, GARBAGE, CLOSED])  # auth / host key: the scanner's side


def test_allow_incomplete_turns_exit_3_into_the_findings_verdict(scan_sshd: ScanSshd, tmp_path: Path) -> None:
    cfg = scan_sshd.config(tmp_path / "ssh_config")
    run = run_scan(f"{GOOD[0]},{CLOSED}", "-F", str(cfg), "--allow-incomplete")
    assert run.doc is not None and run.outcome(CLOSED) is not None
    assert run.rc == 0, run.err


def test_accept_new_host_keys_records_new_keys_and_still_refuses_changed(scan_sshd: ScanSshd, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text((scan_sshd.dir / "known_hosts").read_text())
    cfg = scan_sshd.config(tmp_path / "ssh_config", known_hosts=known)
    run = run_scan(f"{UNKNOWN_KEY},{CHANGED}", "-F", str(cfg), "--accept-new-host-keys")
    assert run.doc is not None, run.err
    assert run.hosts == [UNKNOWN_KEY]
    changed = run.outcome(CHANGED)
    assert changed is not None and changed["status"] == "hostkey" and "CHANGED" in changed["detail"]
    assert f"[{UNKNOWN_KEY}]:{scan_sshd.port} {scan_sshd.host_pub}" in known.read_text().splitlines()
    again = run_scan(UNKNOWN_KEY, "-F", str(cfg))  # recorded: trusted without the option now
    assert again.rc == 0 and again.doc is not None and again.hosts == [UNKNOWN_KEY], again.err


def test_hanging_command_is_killed_on_the_node(scan_sshd: ScanSshd, tmp_path: Path) -> None:
    """The timeout is respected (the scan returns) and the hung command does not linger."""
    import psutil

    cfg = scan_sshd.config(tmp_path / "ssh_config")
    run = run_scan(HANG, "-F", str(cfg), "--timeout", "1")
    assert run.doc is not None and run.outcome(HANG) == {
        "target": HANG,
        "status": "timeout",
        "detail": "the agent did not finish within 1 s",
    }
    sshd = psutil.Process(int((scan_sshd.dir / "scenarios.pid").read_text()))
    lingering = []
    for _ in range(50):  # bounded: sshd reaps the killed session
        lingering = [p for p in sshd.children(recursive=True) if "sleep" in " ".join(p.cmdline())]
        if not lingering:
            break
        psutil.wait_procs(lingering, timeout=0.1)
    assert lingering == []


def test_unresolvable_name_is_an_outcome_and_the_others_still_answer(scan_sshd: ScanSshd, tmp_path: Path) -> None:
    cfg = scan_sshd.config(tmp_path / "ssh_config")
    run = run_scan(f"no-such-node-cv.invalid,{GOOD[3]}", "-F", str(cfg), "--connect-timeout", "20")
    assert run.hosts == [GOOD[3]]
    missing = run.outcome("no-such-node-cv.invalid")
    assert missing is not None and missing["status"] == "unreachable"
    assert missing["detail"].startswith("name does not resolve")
