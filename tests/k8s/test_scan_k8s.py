"""`validator scan --k8s` on emulated pods (tests/k8s/cluster.py): pods listed with `kubectl get
pods -o json` and reached with `kubectl exec -i POD -- python3 -`. No Kubernetes API server can
run here: the `kubectl` on PATH is the fake in tests/k8s/kubectl, which answers from a JSON file
and runs exec inside the emulated pods (network, UTS and mount namespaces). Everything else is
real: the agent, the checks, the net check's sockets between the pods' namespaces."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import VALIDATOR
from tests.k8s.cluster import TRAIN, Cluster, k8s_cluster  # noqa: F401  (the fixture)
from tests.scan.conftest import ScanRun, run_scan

pytestmark = [pytest.mark.root]


@pytest.fixture(scope="module")
def train(k8s_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> tuple[ScanRun, Path]:  # noqa: F811
    drain = tmp_path_factory.mktemp("drain") / "drain.txt"
    drain.write_text("stale\n")
    run = run_scan("--k8s", "-l", "job-name=train", "-n", "ml", "--drain-list", str(drain), env=k8s_cluster.env())
    return run, drain


def test_json_report_names_the_pod_that_differs_and_drains_it(train: tuple[ScanRun, Path]) -> None:
    run, drain = train
    assert run.doc is not None, run.err
    assert run.doc["scan"] == {**run.doc["scan"], "transport": "kubectl", "targets": 4, "reached": 4}
    assert sorted(run.hosts) == TRAIN and run.doc["outcomes"] == []
    assert run.named("ENV002") == ["train-3"]  # NCCL_IB_DISABLE=1 in that pod alone
    assert run.doc["drain"] == ["train-3"] and drain.read_text() == "train-3\n"
    assert run.rc == 1 and "Traceback" not in run.err


def test_table_and_html(k8s_cluster: Cluster, tmp_path: Path) -> None:  # noqa: F811
    base = [*VALIDATOR, "scan", "--k8s", "-l", "job-name=train"]  # -n: the context's namespace (ml)
    table = subprocess.run([*base, "-f", "table"], capture_output=True, text=True, env=k8s_cluster.env(),
                           timeout=300, check=False)  # fmt: skip
    assert table.returncode == 1, table.stderr
    assert "ENV002" in table.stdout and "drain: train-3 (1 host)" in table.stdout, table.stdout
    # the exclusion in the pods' own form closes the table (the Slurm forms need Slurm hosts)
    assert table.stdout.rstrip().splitlines()[-1].startswith("  kubernetes: kubectl cordon"), table.stdout
    page = tmp_path / "scan.html"
    html = subprocess.run([*base, "-f", "html", "-o", str(page)], capture_output=True, text=True,
                          env=k8s_cluster.env(), timeout=300, check=False)  # fmt: skip
    assert html.returncode == 1, html.stderr
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "train-3" in text and "ENV002" in text
    assert "kubectl cordon" in text and "scontrol" not in text, "pods are drained by cordoning their nodes"


def test_net_check_between_pods(k8s_cluster: Cluster) -> None:  # noqa: F811
    run = run_scan("--k8s", "-l", "job-name=train,drift!=yes", "--net-check", env=k8s_cluster.env())
    assert run.doc is not None, run.err
    # the ring over 3 pods links every pair once (validator/netcheck/ring.py): 3 probes through the
    # pods' namespaces, each measured (latency, throughput both ways)
    net = run.doc["scan"]["net_check"]
    assert (net["nodes"], net["probes"], net["failed"]) == (3, 3, 0), run.doc["findings"]
    assert sorted(run.hosts) == TRAIN[:3] and run.rc == 0, run.err


def test_a_pod_that_is_not_running_is_unreachable_without_an_exec(k8s_cluster: Cluster) -> None:  # noqa: F811
    run = run_scan("--k8s", "-l", "case-pending", env=k8s_cluster.env())
    assert run.doc is not None, run.err
    pending = run.outcome("pending-0")
    assert pending is not None and pending["status"] == "unreachable" and "Pending" in pending["detail"]
    assert sorted(run.hosts) == TRAIN[:2] and run.rc == 3


@pytest.mark.parametrize(
    ("args", "path", "line"),
    [
        (["--context", "nope"], None, 'kubectl get pods failed: error: context "nope" does not exist'),
        (["--context", "other"], None, "no pods match"),
        (["-l", "job-name=nothing"], None, "no pods match"),
        ([], "/nonexistent", "kubectl not found: --k8s needs kubectl on PATH"),  # /usr/bin has the real one
    ],
)
def test_scanner_side_errors_are_one_line_and_exit_2(
    k8s_cluster: Cluster,  # noqa: F811
    args: list[str],
    path: str | None,
    line: str,
) -> None:
    env = k8s_cluster.env(**({"PATH": path} if path else {}))
    p = subprocess.run([*VALIDATOR, "scan", "--k8s", "-l", "job-name=train", *args], capture_output=True, text=True,
                       env=env, timeout=120, check=False)  # fmt: skip
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert p.stderr.count("\n") == 1 and line in p.stderr and "Traceback" not in p.stderr


def test_an_interpreter_missing_in_every_pod_is_the_scans_failure(k8s_cluster: Cluster) -> None:  # noqa: F811
    """Every pod lacks the given --python: the scan failed, not the pods (exit 2, nothing to drain),
    and the hint speaks of the pods' image, not of SSH."""
    run = run_scan("--k8s", "-l", "job-name=train", "--python", "python3.99", env=k8s_cluster.env())
    assert run.rc == 2 and run.doc is not None, run.err
    assert run.doc["drain"] == [] and "the pods' image" in str(run.doc["scan"]["failed"]), run.doc["scan"]
    assert "SSH" not in str(run.doc["scan"]["failed"]) and "Traceback" not in run.err
