"""The scan's HTML page: self-contained, the node x check matrix folds identical hosts, findings
expand to expected/actual/fix/verify, the drain summary; and it renders in headless Chromium."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from validator.drain import drain_hosts
from validator.model import Finding, Outcome, Report, Severity
from validator.report import RenderOptions
from validator.report.html import matrix, render_html

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
HOSTS = [f"gpu{i:03d}" for i in range(1, 65)]


def report() -> Report:
    everyone = HOSTS[:62]  # gpu063 and gpu064 gave no facts
    return Report(
        findings=[
            Finding("SW002", Severity.ERROR, "NCCL version differs", "NCCL 2.21.5 where the others have 2.23.4",
                    hosts=["gpu007"], expected="2.23.4", actual="2.21.5", fix="install NCCL 2.23.4 <everywhere>",
                    verify="python3 -c 'import torch; print(torch.cuda.nccl.version())'"),
            Finding("NET004", Severity.WARNING, "NCCL would use a virtual interface", "NCCL would use br-5f3c",
                    hosts=["gpu012", "gpu013"], expected="a physical interface", actual="br-5f3c",
                    fix="set NCCL_SOCKET_IFNAME", verify="ip -br addr show"),
            Finding("NET007", Severity.INFO, "Chosen interface name differs", "uses ens5", hosts=["gpu013"],
                    expected="eth0", actual="ens5", fix="use a prefix", verify="ip -br addr"),
            Finding("PRF004", Severity.ERROR, "GPU model differs from the profile", "A100 where the profile wants H100",
                    hosts=everyone, expected="H100", actual="A100", fix="use the right partition", verify="nvidia-smi -L"),
        ],
        participants=len(everyone),
        hosts=everyone,
        outcomes=[Outcome("gpu063", "unreachable", "connection refused: no sshd listening on the SSH port"),
                  Outcome("gpu064", "auth", "permission denied (publickey)")],
        title="scan of gpu[001-064]",
    )  # fmt: skip


class Parsed(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> Parsed:
    p = Parsed()
    p.feed(page)
    return p


def test_drain_skips_cluster_wide_findings_and_credential_outcomes() -> None:
    # PRF004 names every reached host: a profile/cluster matter, not a node to drain
    assert drain_hosts(report()) == ["gpu007", "gpu063"]
    assert drain_hosts(report(), Severity.WARNING) == ["gpu007", "gpu012", "gpu013", "gpu063"]


def test_matrix_folds_hosts_with_identical_rows() -> None:
    columns, rows = matrix(report())
    assert columns == ["PRF004", "SW002", "NET004", "NET007"]
    by_hosts = {",".join(hosts) if len(hosts) < 3 else f"{len(hosts)} hosts": cells for hosts, cells in rows}
    assert by_hosts["gpu063,gpu064"] == ["unreachable"] * 4
    assert by_hosts["gpu007"] == ["fail", "fail", "pass", "pass"]
    assert by_hosts["gpu012"] == ["fail", "pass", "warn", "pass"]
    assert by_hosts["gpu013"] == ["fail", "pass", "warn", "info"]
    assert by_hosts["59 hosts"] == ["fail", "pass", "pass", "pass"]  # folded into one row
    assert rows[0][1] == ["unreachable"] * 4  # worst rows first


def test_page_is_self_contained_and_escaped() -> None:
    page = render_html(report(), RenderOptions())
    parsed = parse(page)
    refs = [v for _, attrs in parsed.tags for k, v in attrs.items() if k in ("src", "href") and v]
    assert all(v.startswith("#") for v in refs), refs  # in-page anchors only: nothing fetched
    assert not re.search(r"(?i)(https?:)?//[a-z0-9]", page.replace("http-equiv", ""))
    assert [t for t, _ in parsed.tags if t in ("script", "link", "img", "iframe")] == []
    assert "install NCCL 2.23.4 &lt;everywhere&gt;" in page
    details = [a for t, a in parsed.tags if t == "details"]
    assert len(details) >= 4  # every finding expands
    text = "".join(parsed.text)
    assert "scontrol update nodename=gpu[007,063] state=drain" in text
    for shown in ("expected", "actual", "fix", "verify", "2.21.5", "torch.cuda.nccl.version()"):
        assert shown in text


def chromium(page: Path, screenshot: Path | None = None) -> str:
    """The DOM Chromium builds from the page (and a screenshot of it): proof that it renders."""
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium not installed")
    profile = tempfile.mkdtemp(prefix="cv-chromium-")
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}"]  # fmt: skip
    try:
        dom = subprocess.run(
            [*base, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True
        ).stdout
        if screenshot is not None:
            subprocess.run(
                [*base, "--window-size=1280,1400", f"--screenshot={screenshot}", page.as_uri()],
                capture_output=True, timeout=120, check=True,
            )  # fmt: skip
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return dom


@pytest.mark.slow
def test_renders_in_headless_chromium(tmp_path: Path) -> None:
    page = tmp_path / "scan.html"
    page.write_text(render_html(report(), RenderOptions()))
    shot = Path(os.environ.get("VALIDATOR_SCREENSHOT", tmp_path / "scan.png"))
    dom = chromium(page, shot)
    assert "Nodes × checks" in dom and "gpu[001-006,008-011,014-062]" in dom  # the folded row, as laid out
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
