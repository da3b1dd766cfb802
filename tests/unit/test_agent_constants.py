"""The node-side agent (validator/agent/probe.py) is standard-library only and self-contained, so
it keeps its own copies of the package's constants; these tests tie each copy to the package's."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import validator
from validator import facts
from validator.agent import probe
from validator.facts import command, ib

SOURCE = Path(probe.__file__).read_text()


def test_schema_and_version_are_the_packages() -> None:
    assert probe.AGENT_SCHEMA == facts.AGENT_SCHEMA  # what the agent writes is what `facts.parse` reads
    assert validator.__version__ == probe.VERSION  # pyproject takes the package's version from __version__


def test_limits_and_option_spellings_are_the_packages() -> None:
    assert probe.IB_MAX["gid_slots"] == ib.IB_GID_SLOTS
    torchrun = {dest: spellings for dest, (_, spellings) in command.TORCHRUN.items()}
    assert torchrun["master_addr"] + torchrun["rdzv_endpoint"] == probe.MASTER_OPTS
    assert torchrun["master_port"] == probe.PORT_OPTS
    assert torchrun["node_rank"] == probe.NODE_RANK_OPTS


def test_the_agent_imports_only_the_standard_library() -> None:
    imported = set()
    for node in ast.walk(ast.parse(SOURCE)):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"relative import in the agent: {node.module}"
            imported.add(node.module.split(".")[0])
    assert imported and imported <= set(sys.stdlib_module_names), sorted(imported - set(sys.stdlib_module_names))


def test_the_agent_run_alone_writes_what_the_package_reads(tmp_path: Path) -> None:
    """The agent's source fed to an isolated python3 (no validator on its path), as over SSH:
    its document carries the package's schema and version, and the package parses it."""
    p = subprocess.run([sys.executable, "-I", "-", "--no-port-probe", "--gpu-sources", "proc"], input=SOURCE,
                       capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    raw = json.loads(p.stdout)
    assert (raw["agent_schema"], raw["validator"]) == (facts.AGENT_SCHEMA, validator.__version__)
    parsed = facts.parse(raw)
    assert parsed["validator"] == validator.__version__ and parsed["hostname"] == raw["hostname"]
