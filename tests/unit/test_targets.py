"""Hostlists (Slurm's grammar through ClusterShell) and rank folding; examples from reference §1.2."""

from __future__ import annotations

from pathlib import Path

import pytest

from validator.errors import UserError
from validator.targets import expand, expand_ranks, expand_targets, fold_hosts, fold_ranks


@pytest.mark.parametrize(
    ("expr", "hosts"),
    [
        ("gpu-[001-004,7]", {"gpu-001", "gpu-002", "gpu-003", "gpu-004", "gpu-7"}),  # each token keeps its width
        ("a[1-2]b[3-4]", {"a1b3", "a1b4", "a2b3", "a2b4"}),
        ("gpu-a[1-2]-b,login1", {"gpu-a1-b", "gpu-a2-b", "login1"}),
        ("n[1-2]", {"n1", "n2"}),  # the real SLURM_JOB_NODELIST of the harness
        ("node[0000-1023]", {f"node{i:04d}" for i in range(1024)}),
    ],
)
def test_expand(expr: str, hosts: set[str]) -> None:
    got = expand(expr)
    assert set(got) == hosts and len(got) == len(hosts)


def test_expand_keeps_slurm_order_for_mixed_widths() -> None:
    """SLURM_NODEID indexes the nodelist in Slurm's order; a wrong order names the wrong host for a
    missing node rank (RNK002/RNK007)."""
    assert expand("node[001-004,7]") == ["node001", "node002", "node003", "node004", "node7"]
    assert expand("n[3,1-2],a1") == ["n3", "n1", "n2", "a1"]
    assert expand("a[1-2]b[3-4]") == ["a1b3", "a1b4", "a2b3", "a2b4"]


@pytest.mark.parametrize("bad", ["node[4-1]", "node[1-2", "node[a-b]", "node[²-3]"])  # "²".isdigit(): int() refuses it
def test_bad_hostlists_are_user_errors(bad: str) -> None:
    with pytest.raises(UserError, match="bad hostlist"):
        expand(bad)


def test_fold() -> None:
    assert fold_hosts([f"node{i:02d}" for i in range(1, 16)]) == "node[01-15]"
    assert fold_hosts(["b2", "b1", "a", "b1"]) == "a,b[1-2]"
    assert fold_ranks([5, 0, 1, 2, 3, 3]) == "0-3,5"
    assert fold_ranks([]) == ""


def test_host_file_with_comments_and_line_numbers(tmp_path: Path) -> None:
    f = tmp_path / "hosts"
    f.write_text("# the job's nodes\nnode[01-02]  # rack 1\n\nnode03\n")
    assert expand_targets([f"@{f}", "node02", "login1"]) == ["node01", "node02", "node03", "login1"]
    f.write_text("node01\nnode[3-\n")
    with pytest.raises(UserError) as e:
        expand_targets([f"@{f}"])
    assert e.value.where == f"{f}:2"
    with pytest.raises(UserError, match="cannot read host file"):
        expand_targets([f"@{tmp_path}/missing"])


def test_fold_hosts_folds_as_clustershell_does_whatever_the_names() -> None:
    """The runs folded before ClusterShell sees them change nothing it would print: padding,
    widths, names with two numbers, names with none, suffixes (a fixed sample of 3,000 mixes)."""
    import random

    from ClusterShell.NodeSet import NodeSet

    pool = ["node7", "node07", "node007", "node8", "node10", "node9", "node09", "node99", "node100", "a", "b1",
            "b2", "x-1-y", "rack1-node01", "rack1-node02", "rack2-node01", "n1.ib", "n2.ib", "n3.ib", "n1", "gpu-0",
            "gpu-1", "gpu-3", "h_5", "h_6", "c:1", "c:2", "node0", "node00", "node-1", "z9z", "z10z", "n01a", "n02a",
            "n2a", "aa1", "a1", "a01"]  # fmt: skip
    rng = random.Random(14)
    for _ in range(3000):
        hosts = rng.sample(pool, rng.randint(1, len(pool)))
        assert fold_hosts(hosts) == str(NodeSet.fromlist(sorted(set(hosts)))), hosts
    assert fold_hosts(f"gpu{i:05d}" for i in range(12500) if i % 10 != 5).startswith("gpu[00000-00004,00006-00014,")


@pytest.mark.parametrize("bad", ["²", "1-²", "٣-²"])
def test_rank_ranges_with_digits_int_refuses_are_user_errors(bad: str) -> None:
    """str.isdigit() is true of "²" (superscript two), which int() refuses: a user error naming the range, not a
    traceback; decimal digits of any script (what int() reads) still count."""
    with pytest.raises(UserError, match="bad rank range"):
        expand_ranks(bad)
    assert expand_ranks("٣") == [3]
