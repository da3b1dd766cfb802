"""One launcher table that the agent obeys (issue 22): every variable that facts/launch.py reads
for a launcher passes the agent's filter (else the node drops it before the checker sees it, as
Flux's FLUX_TASK_RANK was), and every rank or node-rank variable is one the agent reads to decide
"rank 0" (RANK0_ENV). Flux was added by following docs/architecture.md's launcher recipe."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from validator.agent.probe import RANK0_ENV, filtered_env
from validator.facts.launch import ENV_FIELDS, PET_FIELDS, TASKS_PER_NODE, TORCH_FIELDS, parse_launch
from validator.model import LAUNCHERS

TABLES = [*ENV_FIELDS.values(), PET_FIELDS, TORCH_FIELDS]
READ = sorted({v for fields in TABLES for _, names in fields for v in names} | set(TASKS_PER_NODE))


@pytest.mark.parametrize("name", READ)
def test_every_variable_read_passes_the_agents_filter(name: str) -> None:
    assert filtered_env({name: "1"}) == {name: "1"}, f"the agent drops {name}: add it to ALLOW_PREFIXES/ALLOW_NAMES"


def test_every_rank_variable_decides_rank_zero_on_the_node() -> None:
    ranks = {v for fields in TABLES for field, names in fields if field in ("rank", "node_rank") for v in names}
    assert ranks - set(RANK0_ENV) == set(), "a rank variable the agent does not read for 'is this rank 0'"


def test_every_entry_is_a_launcher() -> None:
    assert set(ENV_FIELDS) <= set(LAUNCHERS)


FLUX = {"FLUX_TASK_RANK": "5", "FLUX_TASK_LOCAL_ID": "1", "FLUX_JOB_SIZE": "8", "FLUX_JOB_NNODES": "4",
        "FLUX_JOB_ID": "f2RJqgD1T", "MASTER_ADDR": "node001", "MASTER_PORT": "29500"}  # fmt: skip


def test_flux_task_contract() -> None:
    """flux-core's shell sets FLUX_TASK_RANK, FLUX_TASK_LOCAL_ID, FLUX_JOB_SIZE, FLUX_JOB_NNODES and
    FLUX_JOB_ID for every task (src/shell/task.c); it also serves PMI, so PMI_RANK may be set too."""
    lf = parse_launch(filtered_env({**FLUX, "PMI_RANK": "5", "PMI_SIZE": "8"}), None)
    assert lf["launcher"] == "flux"
    assert (lf["rank"], lf["local_rank"], lf["world_size"], lf["nnodes"]) == (5, 1, 8, 4)
    assert lf["job_id"] == "f2RJqgD1T"


def test_flux_task_through_the_real_agent() -> None:
    """The agent, run as a node runs it (the standard-library probe in its own process), keeps the
    Flux variables, and the checker reads the task's rank from them."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **FLUX}
    p = subprocess.run([sys.executable, "-m", "validator", "probe", "--json"], env=env, capture_output=True,
                       text=True, timeout=60, check=False)  # fmt: skip
    assert p.returncode == 0, p.stderr
    facts = json.loads(p.stdout.splitlines()[0])
    assert facts["launch"]["launcher"] == "flux" and facts["launch"]["rank"] == 5, facts["launch"]
