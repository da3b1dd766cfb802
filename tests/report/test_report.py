"""Reports: the table folds identical findings into one row, JSON round-trips, JUnit parses."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from tests.factories import rank_job, tweak
from validator import pipeline
from validator.errors import UserError
from validator.model import Finding, Outcome, Report, Severity
from validator.report import RenderOptions, render
from validator.report.text import fold, render_facts


def finding(host: str, ranks: list[int], code: str = "SYS001", severity: Severity = Severity.ERROR) -> Finding:
    return Finding(
        code,
        severity,
        "/dev/shm too small for NCCL",
        "/dev/shm is 64 MiB",
        ranks,
        [host],
        ">= 256 MiB",
        "64 MiB",
        "mount more",
        "df -h /dev/shm",
    )


def report(*findings: Finding, **kw: object) -> Report:
    return Report(list(findings), participants=16, hosts=["node01", "node02"], **kw)  # type: ignore[arg-type]


def test_identical_findings_fold_into_one_row() -> None:
    rows = fold([finding(f"node{n:02d}", [n * 8 + r for r in range(8)]) for n in range(1, 16)])
    assert len(rows) == 1
    assert rows[0].hosts[0] == "node01" and len(rows[0].hosts) == 15 and len(rows[0].ranks) == 120
    text = render(report(*[finding(f"node{n:02d}", [n]) for n in range(1, 16)]), "table")
    assert text.count("SYS001") == 1
    assert "node[01-15] · rank 1-15" in text


def test_different_values_stay_separate_rows() -> None:
    other = finding("node03", [3])
    other.actual = "32 MiB"
    assert len(fold([finding("node01", [1]), other])) == 2


def test_table_names_culprits_expected_fix_and_verify() -> None:
    job = tweak(rank_job(2, 2), 3, launch={"world_size": 5})
    text = render(pipeline.check(job, codes=["RNK004"]), "table")
    lines = text.splitlines()
    assert lines[0] == "cluster-validator check: 1 error — 4 participants on 2 hosts"
    assert lines[1].startswith("ERROR   RNK004  WORLD_SIZE disagrees — node002 · rank 3")
    assert "        expected 4, got 5" in lines
    assert any(ln.startswith("        fix:    ") for ln in lines) and any(
        ln.startswith("        verify: ") for ln in lines
    )


def test_table_lists_input_errors_and_unreachable_targets() -> None:
    r = report(input_errors=["a.json:3: not valid JSON"], outcomes=[Outcome("node07", "unreachable", "ssh: timed out")])
    text = render(r, "table")
    assert "INPUT   a.json:3: not valid JSON" in text and "UNREACHABLE" in text.upper() and "node07" in text
    assert render(report(), "table").startswith("cluster-validator: no findings — 16 participants on 2 hosts")


def test_json_round_trip() -> None:
    r = report(finding("node01", [0, 1]), finding("node02", [8], "NET007", Severity.INFO), input_errors=["x"])
    doc = json.loads(render(r, "json"))
    assert doc["schema"] == 1 and doc["summary"] == {"info": 1, "warning": 0, "error": 1}
    assert doc["findings"][0]["severity"] == "error"
    assert (doc["findings"][0]["ranks"], doc["findings"][0]["hosts"]) == ("0-1", "node01")  # folded, like the table
    back = Report.from_json(doc)
    assert [f.to_json() for f in back.findings] == doc["findings"] and back.input_errors == ["x"]
    assert (back.findings[0].ranks, back.findings[0].hosts) == ([0, 1], ["node01"])
    assert (r.exit_code(), r.exit_code(Severity.INFO), Report([], 1, []).exit_code()) == (2, 2, 0)


def test_junit_one_testcase_per_code_failures_at_or_above_fail_on() -> None:
    r = report(finding("node01", [0]), finding("node02", [8], "NET007", Severity.INFO))
    xml = render(r, "junit", RenderOptions(codes=["SYS001", "NET007", "RNK001"], fail_on=Severity.WARNING))
    suite = ET.fromstring(xml.split("?>", 1)[1])
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) == {
        "SYS001 /dev/shm too small for NCCL",
        "NET007 /dev/shm too small for NCCL",
        "RNK001 Duplicate rank",
    }
    assert cases["SYS001 /dev/shm too small for NCCL"].find("failure") is not None
    assert cases["NET007 /dev/shm too small for NCCL"].find("failure") is None  # info < warning
    assert cases["NET007 /dev/shm too small for NCCL"].find("system-out") is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "0")
    never = ET.fromstring(render(r, "junit", RenderOptions(codes=[], fail_on=None)).split("?>", 1)[1])
    assert never.get("failures") == "0"


def test_junit_reports_input_errors_and_outcomes_as_errors() -> None:
    r = report(input_errors=["a.json:3: not valid JSON"], outcomes=[Outcome("node07", "timeout", "no answer in 30 s")])
    suite = ET.fromstring(render(r, "junit").split("?>", 1)[1])
    assert suite.get("errors") == "2"
    assert [e.get("type") for e in suite.iter("error")] == ["timeout", "input"]


def test_unknown_format() -> None:
    with pytest.raises(UserError, match="unknown format 'yaml'"):
        render(report(), "yaml")


def test_facts_for_a_person() -> None:
    text = render_facts(rank_job(1, 2)[1])
    assert "launcher torchrun (rank mode)" in text
    assert "rank             1" in text and "env:RANK" in text
    assert "NCCL would use eth0" in text and "GPUs (nvml): 8 x NVIDIA H100 80GB HBM3" in text


def test_a_long_list_is_bounded_in_the_table_and_whole_in_the_json() -> None:
    """1,250 scattered missing nodes: the table line stays short (a preflight verdict carries the
    table to every node), the JSON report still names every one."""
    from validator.report.text import PART_MAX
    from validator.targets import expand, expand_ranks, fold_hosts, fold_ranks

    absent = list(range(5, 12500, 10))
    hosts = [f"gpu{n:05d}" for n in absent]
    target = f"{len(absent)} node ranks: {fold_ranks(absent)}"
    detail = f"expected on {fold_hosts(hosts)}; never reached the coordinator in 20 s"
    r = report(finding("node01", absent), outcomes=[Outcome(target, "missing", detail)])
    table = render(r, "table")
    line = next(x for x in table.splitlines() if x.startswith("MISSING"))
    assert len(line) < 3 * PART_MAX and "more characters in the JSON report" in line
    assert "rank 5,15,25" in table and len(table) < 6 * PART_MAX
    doc = json.loads(render(r, "json"))
    (out,) = doc["outcomes"]
    assert expand_ranks(out["target"].split(": ", 1)[1]) == absent
    assert expand(out["detail"].split("expected on ", 1)[1].split(";", 1)[0]) == hosts
    assert expand_ranks(doc["findings"][0]["ranks"]) == absent
