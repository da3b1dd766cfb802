"""Launch profiles: the shipped examples validate, bad ones fail naming file:line, and
docs/profiles.md documents exactly the schema in validator/profiles.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from validator.errors import UserError
from validator.model import LAUNCHERS
from validator.profiles import SCHEMA, VERSION_KEYS, load_profile

ROOT = Path(__file__).resolve().parent.parent.parent
PROFILES = sorted((ROOT / "launch_profiles").glob("*.yaml"))


def test_the_required_examples_exist() -> None:
    names = {p.name for p in PROFILES}
    assert {"torchrun-2x8.yaml", "slurm-64xh100.yaml", "kubeflow-pytorchjob.yaml"} <= names


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.name)
def test_every_shipped_profile_validates(path: Path) -> None:
    p = load_profile(path)
    assert p.name == path.stem
    assert p.nodes and p.ranks_per_node and p.launcher in LAUNCHERS


def test_examples_pin_what_they_describe() -> None:
    t = load_profile(ROOT / "launch_profiles" / "torchrun-2x8.yaml")
    assert (t.nodes, t.ranks_per_node, t.gpus_per_node, t.launcher) == (2, 8, 8, "torchrun")
    s = load_profile(ROOT / "launch_profiles" / "slurm-64xh100.yaml")
    assert (s.nodes, s.gpu_model, s.launcher, s.min_shm_mib) == (64, "H100", "slurm", 1024)
    assert s.versions["cuda"] == "12.4" and s.version_ok("torch", "2.5.1+cu124") and not s.version_ok("torch", "2.4.0")
    k = load_profile(ROOT / "launch_profiles" / "kubeflow-pytorchjob.yaml")
    assert (k.launcher, k.master_port, k.interface) == ("kubeflow", 23456, "eth0")


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "p.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("name: x\ngpus_per_nod: 8\n", 2, "unknown key 'gpus_per_nod' (did you mean 'gpus_per_node'?)"),
        ("versions:\n  torch: '2.5.*'\n  torh: '2.5.*'\n", 3, "unknown key 'versions.torh' (did you mean 'torch'?)"),
        ("nodes: sixty-four\n", 1, "nodes must be an integer, got 'sixty-four'"),
        ("nodes: 2\nnodes: 3\n", 2, "duplicate key 'nodes'"),
        ("nodes: 0\n", 1, "nodes must be at least 1, got 0"),
        ("master_port: 70000\n", 1, "master_port must be from 1 to 65535, got 70000"),
        ("launcher: srun\n", 1, "launcher must be one of"),
        ("env:\n  NCCL_IB_HCA: [mlx5_0]\n", 2, "env.NCCL_IB_HCA must be a single value"),
        ("env: eth0\n", 1, "env must be a mapping of NAME: value"),
        ("versions: 2.5\n", 1, "versions must be a mapping"),
        ("nodes: [1, 2\n", 2, "not valid YAML"),
        ("- nodes\n", 1, "profile must be a mapping"),
    ],
)
def test_bad_profiles_name_file_and_line(tmp_path: Path, text: str, where: int, message: str) -> None:
    p = write(tmp_path, text)
    with pytest.raises(UserError) as e:
        load_profile(p)
    assert e.value.where == f"{p}:{where}"
    assert message in e.value.message


def test_empty_and_missing_profiles(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="profile is empty"):
        load_profile(write(tmp_path, "# nothing\n"))
    with pytest.raises(UserError, match="cannot read profile"):
        load_profile(tmp_path / "missing.yaml")


def test_strings_are_taken_as_written(tmp_path: Path) -> None:
    p = load_profile(
        write(tmp_path, "versions:\n  cuda: 12.10\nenv:\n  NCCL_IB_DISABLE: yes\n  OMP_NUM_THREADS: 1\ninterface: 0\n")
    )
    assert p.versions == {"cuda": "12.10"}
    assert p.env == {"NCCL_IB_DISABLE": "yes", "OMP_NUM_THREADS": "1"}
    assert p.interface == "0"


# ---------------------------------------------------------------- docs/profiles.md in sync


DOC = (ROOT / "docs" / "profiles.md").read_text()


def documented_keys() -> set[str]:
    table = DOC.split("## Keys", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([a-z_]+)` \|", table, re.M))


def test_docs_list_exactly_the_schema_keys() -> None:
    assert documented_keys() == set(SCHEMA)


def test_docs_name_every_launcher_and_version_key() -> None:
    for name in (*LAUNCHERS, *VERSION_KEYS):
        assert f"`{name}`" in DOC, name


def test_docs_link_every_example() -> None:
    for p in PROFILES:
        assert f"launch_profiles/{p.name}" in DOC, p.name


def test_schema_is_read_from_the_profile_dataclass() -> None:
    """One source: the keys are the fields of Profile (path aside), a Literal field's values are
    its only choices, and a loaded profile fills exactly those fields."""
    import dataclasses

    from validator.profiles import CHOICES, Profile

    assert list(SCHEMA) == [f.name for f in dataclasses.fields(Profile) if f.name != "path"]
    assert SCHEMA["nodes"] is int and SCHEMA["gpu_model"] is str and SCHEMA["env"] is dict
    assert SCHEMA["versions"] == dict.fromkeys(VERSION_KEYS, str)
    assert CHOICES == {"launcher": LAUNCHERS, "layout_spanning": ("warning", "error")}
