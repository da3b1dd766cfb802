"""The published JSON Schemas (docs/schema/): generated from the model, and every JSON document
the commands print validates against them: facts (probe, every facts and raw fixture), and the
reports of check, node-check, diagnose (every diagnose fixture), preflight and scan."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.conftest import FIXTURES, ROOT, VALIDATOR, Sshd, free_port
from tests.factories import cpu_job, node_job, rank_job
from tests.preflight.conftest import preflight, ranks
from validator import schema
from validator.cli import run as cli_run
from validator.facts import load_facts

SCHEMA_DIR = ROOT / "docs" / "schema"
RAW_OR_FACTS = sorted(
    p for p in FIXTURES.rglob("*.json") if '"kind": "raw"' in (t := p.read_text()) or '"kind": "facts"' in t
)
DIAGNOSE_INPUTS = sorted(
    [p for p in (FIXTURES / "diagnose" / "public").glob("*.log")]
    + [p for p in (FIXTURES / "diagnose" / "nccl-gpu").iterdir() if p.suffix != ".md"]
    + [
        FIXTURES / "diagnose" / "fr-gloo",
        FIXTURES / "diagnose" / "fr-gloo-ok",
        FIXTURES / "diagnose" / "torchrun-summary.log",
    ]
)


def validator_for(kind: str) -> jsonschema.protocols.Validator:
    published = json.loads((SCHEMA_DIR / schema.file_name(kind)).read_text())
    cls = jsonschema.validators.validator_for(published)
    cls.check_schema(published)
    return cls(published)


FACTS = validator_for("facts")
REPORT = validator_for("report")


def valid(v: jsonschema.protocols.Validator, doc: Any) -> None:
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(doc)]
    assert errors == [], errors[:5]


def test_published_schemas_are_what_the_generator_makes() -> None:
    assert sorted(p.name for p in SCHEMA_DIR.glob("*.json")) == sorted(schema.expected_files())
    for name, text in schema.expected_files().items():
        assert (SCHEMA_DIR / name).read_text() == text, f"{name} drifted: run `python -m validator.schema docs/schema`"


def test_schema_command_prints_the_published_schema(capsys: pytest.CaptureFixture[str]) -> None:
    for kind in ("facts", "report"):
        assert cli_run(["schema", kind]) == 0
        assert capsys.readouterr().out == (SCHEMA_DIR / schema.file_name(kind)).read_text()
    assert cli_run(["schema", "nope"]) == 2
    assert "unknown schema 'nope'" in capsys.readouterr().err


def test_schema_rejects_what_the_loader_rejects() -> None:
    good = rank_job(1, 2)[0]
    valid(FACTS, good)
    for bad in ({**good, "pid": "12"}, {**good, "gpus": {**good["gpus"], "devices": [{"index": 0}]}},
                {**good, "extra": 1}, {**good, "schema": 2}):  # fmt: skip
        assert list(FACTS.iter_errors(bad)), bad


@pytest.mark.parametrize("path", RAW_OR_FACTS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_facts_of_every_fixture_validate(path: Path) -> None:
    valid(FACTS, load_facts(json.loads(path.read_text()), str(path)))


def test_facts_of_factories_and_of_a_real_probe_validate() -> None:
    for doc in [*rank_job(2, 2), *node_job(2, 4), *cpu_job(2, 2)]:
        valid(FACTS, doc)
    p = subprocess.run([*VALIDATOR, "probe", "--json", "--", "torchrun", "--nproc-per-node=2", "train.py"],
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60,
                       check=True)  # fmt: skip
    valid(FACTS, json.loads(p.stdout))


def test_check_reports_validate(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "facts", "schema": 1')
    prof = tmp_path / "p.yaml"
    prof.write_text("name: eight\ngpus_per_node: 8\n")
    for args in (
        [str(p) for p in RAW_OR_FACTS],
        [str(RAW_OR_FACTS[0]), str(bad)],
        [str(RAW_OR_FACTS[0]), "-p", str(prof)],
    ):
        code = cli_run(["check", "-f", "json", *args])
        doc = json.loads(capsys.readouterr().out)
        valid(REPORT, doc)
        assert code in (0, 1, 2) and (code == 0) == (doc["findings"] == [] and doc["input_errors"] == [])


def test_node_check_report_validates(tmp_path: Path) -> None:
    prof = tmp_path / "p.yaml"
    prof.write_text("name: eight\ngpus_per_node: 8\n")
    p = subprocess.run([*VALIDATOR, "node-check", "-f", "json", "-p", str(prof)], env={**os.environ, "PYTHONPATH": str(ROOT)},
                       capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert p.returncode == 1, p.stderr
    valid(REPORT, json.loads(p.stdout))


@pytest.mark.parametrize("path", DIAGNOSE_INPUTS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_diagnose_reports_validate(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli_run(["diagnose", str(path), "-f", "json"])
    doc = json.loads(capsys.readouterr().out)
    valid(REPORT, doc)
    assert "diagnosis" in doc


def test_preflight_report_validates(tmp_path: Path) -> None:
    (run,) = preflight(tmp_path, ranks(1, free_port()), "--format", "json", limit=60)
    assert run.report is not None, run.err
    valid(REPORT, run.report)
    valid(REPORT, json.loads(run.out))


@pytest.mark.root
def test_scan_report_validates(sshd_loopback: Sshd) -> None:
    p = subprocess.run([*VALIDATOR, "scan", "127.0.9.[4-5],127.0.0.0.1", "-F", str(sshd_loopback.config), "-f", "json",
                        "--connect-timeout", "3"], env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                       text=True, timeout=120, check=False)  # fmt: skip
    doc = json.loads(p.stdout)
    valid(REPORT, doc)
    assert doc["scan"]["reached"] == 2 and doc["outcomes"], doc["outcomes"]  # one target gave no facts


def test_self_check_names_the_bad_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite runs every command with VALIDATOR_SELF_CHECK=1 (tests/conftest.py): a document that
    drifts from the schema fails the command that printed it, with exit 70 and the field."""
    doc = json.loads(json.dumps(rank_job(1, 1)[0]))
    doc["gpus"]["devices"][0]["index"] = "0"
    monkeypatch.setenv(schema.SELF_CHECK, "1")
    with pytest.raises(schema.SchemaMismatch, match=r"facts-v1.schema.json at gpus/devices/0/index: '0' is not"):
        schema.self_check(doc, "facts")
    assert schema.SchemaMismatch("x").exit_code == 70
    monkeypatch.setenv(schema.SELF_CHECK, "0")
    schema.self_check(doc, "facts")  # off: nothing checked
