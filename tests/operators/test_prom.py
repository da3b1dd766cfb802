"""`--prom-file` of scan and preflight (node-check's is in test_node_check.py): the textfile parses
back with prometheus_client's own parser and holds every finding of the JSON report, by code,
severity and host."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT, VALIDATOR, Sshd, free_port
from tests.preflight.conftest import preflight, ranks
from validator.targets import expand


def metrics(path: Path) -> dict[str, list[Any]]:
    return {m.name: m.samples for m in text_string_to_metric_families(path.read_text())}


def expected(doc: dict[str, Any]) -> dict[tuple[str, str, str], float]:
    """(code, severity, host) -> how many findings of the report name that host."""
    out: dict[tuple[str, str, str], float] = {}
    for f in doc["findings"]:
        for host in expand(f["hosts"]) if f["hosts"] else [""]:
            key = (f["code"], f["severity"], host)
            out[key] = out.get(key, 0) + 1
    return out


def check_file(path: Path, doc: dict[str, Any], command: str, code: int) -> None:
    samples = metrics(path)
    got = {(s.labels["code"], s.labels["severity"], s.labels["host"]): s.value
           for s in samples["cluster_validator_findings"]}  # fmt: skip
    assert got == expected(doc) and got, got
    assert all(s.labels["command"] == command for s in samples["cluster_validator_findings"])
    assert [s.value for s in samples["cluster_validator_exit_code"]] == [code]
    assert [s.value for s in samples["cluster_validator_pass"]] == [1.0 if code == 0 else 0.0]
    assert samples["cluster_validator_duration_seconds"][0].value > 0


@pytest.mark.root
def test_scan_prom_file(sshd_loopback: Sshd, tmp_path: Path) -> None:
    import json

    prof = tmp_path / "p.yaml"
    prof.write_text("name: eight\ngpus_per_node: 8\n")
    prom = tmp_path / "scan.prom"
    p = subprocess.run([*VALIDATOR, "scan", "127.0.9.[1-3]", "-F", str(sshd_loopback.config), "-p", str(prof), "-f",
                        "json", "--prom-file", str(prom)], env={**os.environ, "PYTHONPATH": str(ROOT)},
                       capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    check_file(prom, doc, "scan", 1)
    assert {h for (_, _, h) in expected(doc)} >= {"127.0.9.1", "127.0.9.2", "127.0.9.3"}
    assert [s.value for s in metrics(prom)["cluster_validator_hosts"]] == [3.0]


def test_preflight_prom_file(tmp_path: Path) -> None:
    prof = tmp_path / "p.yaml"
    prof.write_text("name: eight\ngpus_per_node: 8\n")
    prom = tmp_path / "preflight.prom"
    (run,) = preflight(tmp_path, ranks(1, free_port()), "--profile", str(prof), "--prom-file", str(prom), limit=60)
    assert run.rc == 1 and run.report is not None, run.err
    check_file(prom, run.report, "preflight", 1)
    assert "PRF003" in {f["code"] for f in run.report["findings"]}
