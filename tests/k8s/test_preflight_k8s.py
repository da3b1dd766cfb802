"""What the preflight does differently for pods, with real processes on loopback: the one-line
termination log, the PRE001 hint outside and inside a pod, and ENV006 stopping a Kubeflow pod
that would start plain python with nprocPerNode > 1."""

from __future__ import annotations

import time
from pathlib import Path

from tests.conftest import VALIDATOR, free_port
from tests.preflight.conftest import base_env, collect, finding, preflight, ranks, start
from validator.preflight.main import parser


def test_termination_log_defaults_to_the_kubelet_path() -> None:
    assert parser().parse_args(["--termination-log"]).termination_log == "/dev/termination-log"
    assert parser().parse_args(["--termination-log", "/tmp/x", "--timeout", "3"]).termination_log == "/tmp/x"
    assert parser().parse_args(["--termination-log", "--timeout", "3"]).termination_log == "/dev/termination-log"
    assert parser().parse_args([]).termination_log is None


def test_termination_log_is_one_line_and_never_changes_the_verdict(tmp_path: Path) -> None:
    good, bad = tmp_path / "msg", tmp_path / "no-such-dir" / "msg"
    procs = []
    for env, log in zip(ranks(2, free_port()), (good, bad), strict=True):
        argv = [*VALIDATOR, "preflight", "--timeout", "20", "--termination-log", str(log)]
        procs.append((start(argv, base_env(**env), None), None, time.monotonic()))
    runs = collect(procs, 60)
    assert [r.rc for r in runs] == [0, 0], [r.err[-1500:] for r in runs]
    text = good.read_text()
    assert text.count("\n") == 1 and text.startswith("preflight PASSED: 2/2 ranks")
    assert "cannot write the termination log" in runs[1].err and not bad.exists()


def test_unresolvable_master_outside_a_pod_gets_no_kubernetes_advice(tmp_path: Path) -> None:
    env = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "cv-no-such-master.invalid", "MASTER_PORT": str(free_port())}
    (run,) = preflight(tmp_path, [env], "--timeout", "2", limit=30)
    assert run.rc == 1
    msg = finding(run, "PRE001")["message"]
    assert "cv-no-such-master.invalid never resolved here" in msg and "publishNotReadyAddresses" not in msg


def test_unresolvable_master_in_a_pod_names_the_service(tmp_path: Path) -> None:
    env = {"JOB_COMPLETION_INDEX": "1", "NNODES": "2", "MASTER_ADDR": "cv-train-0.cv-train.invalid",
           "MASTER_PORT": str(free_port()), "KUBERNETES_SERVICE_HOST": "10.96.0.1"}  # fmt: skip
    (run,) = preflight(tmp_path, [env], "--timeout", "2", limit=30)
    assert run.rc == 1
    msg = finding(run, "PRE001")["message"]
    assert "`publishNotReadyAddresses: true`" in msg and "Service cv-train" in msg


def test_kubeflow_pods_with_plain_python_and_nproc_per_node_are_stopped(tmp_path: Path) -> None:
    port = str(free_port())
    envs = [
        {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": port,
         "WORLD_SIZE": "4", "RANK": str(n), "PET_NODE_RANK": str(n), "PET_NNODES": "2", "PET_NPROC_PER_NODE": "2"}
        for n in range(2)
    ]  # fmt: skip
    runs = preflight(tmp_path, envs, "--timeout", "20", command=["sh", "-c", "echo training-started"], limit=60)
    assert [r.rc for r in runs] == [0, 0], "sh is not python: nothing to judge"
    runs = preflight(
        tmp_path, envs, "--timeout", "20", command=["python3", "-c", "print('training-started')"], limit=60
    )
    assert [r.rc for r in runs] == [1, 1], [r.err[-1500:] for r in runs]
    assert not any("training-started" in r.out for r in runs), "the job never started"
    f = finding(runs[0], "ENV006")
    assert "WORLD_SIZE=4" in f["message"] and "nprocPerNode=2" in f["message"]
