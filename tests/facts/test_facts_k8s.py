"""Pod contracts (validator/facts/k8s.py through parse_launch): node ranks from replica labels
and JobSet job indexes, and the expected pod hostnames. The example manifests are rendered and
checked end to end in tests/k8s/test_manifests.py; these are the edges."""

from __future__ import annotations

from tests.factories import check, fires, node_job, only, tweak
from validator.agent.probe import filtered_env
from validator.facts.k8s import pod_hosts
from validator.facts.launch import parse_launch
from validator.model import LaunchFacts
from validator.targets import expand


def launch(env: dict[str, str]) -> LaunchFacts:
    return parse_launch(filtered_env(env), None)


def v1(kind: str, index: str, nnodes: str = "3") -> dict[str, str]:
    return {"KUBEFLOW_JOB_NAME": "bert", "KUBEFLOW_REPLICA_TYPE": kind, "KUBEFLOW_REPLICA_INDEX": index,
            "PET_NNODES": nnodes, "MASTER_ADDR": "bert-preflight", "MASTER_PORT": "23456"}  # fmt: skip


def test_pytorchjob_replica_labels_number_the_pods_like_the_operator() -> None:
    assert [launch(v1(k, i))["node_rank"] for k, i in (("master", "0"), ("worker", "0"), ("Worker", "1"))] == [0, 1, 2]
    lf = launch(v1("worker", "1"))
    assert (lf["launcher"], lf["mode"], lf["job_id"]) == ("kubeflow", "node", "bert")
    assert lf["sources"]["node_rank"] == "env:KUBEFLOW_REPLICA_TYPE+KUBEFLOW_REPLICA_INDEX"
    assert expand(lf["nodelist"] or "") == ["bert-master-0", "bert-worker-0", "bert-worker-1"]


def test_an_explicit_node_rank_still_wins_over_the_labels() -> None:
    assert launch({**v1("worker", "0"), "PET_NODE_RANK": "7"})["node_rank"] == 7


@fires("ENV004")
def test_unknown_replica_type_is_reported_not_guessed() -> None:
    env = filtered_env(v1("chief", "0"))
    job = tweak(node_job(1, 1, gpus=0), 0, launch=dict(parse_launch(env, None)), env=env)
    assert job[0]["launch"]["node_rank"] is None
    f = only(check(job, "ENV004"))
    assert "KUBEFLOW_REPLICA_TYPE+KUBEFLOW_REPLICA_INDEX='chief-0'" in f.message


def test_jobset_with_several_child_jobs_numbers_pods_across_them() -> None:
    base = {
        "JOBSET_NAME": "pt",
        "JOBSET_REPLICAS": "2",
        "NNODES": "4",
        "MASTER_ADDR": "pt-w-0-0.pt",
        "MASTER_PORT": "1",
    }
    ranks = [launch({**base, "JOBSET_JOB_INDEX": str(j), "JOB_COMPLETION_INDEX": str(i)})["node_rank"]
             for j in (0, 1) for i in (0, 1)]  # fmt: skip
    assert ranks == [0, 1, 2, 3]
    lf = launch({**base, "JOBSET_JOB_INDEX": "1", "JOB_COMPLETION_INDEX": "0"})
    assert expand(lf["nodelist"] or "") == ["pt-w-0-0", "pt-w-0-1", "pt-w-1-0", "pt-w-1-1"]


def test_pod_hostnames_per_controller() -> None:
    assert pod_hosts({"JOB_COMPLETION_INDEX": "0"}, "train-0.train", 1) == "train-0"
    assert pod_hosts({"JOB_COMPLETION_INDEX": "0"}, "train-0.train", 12) == "train-[0-11]"
    assert pod_hosts({"LWS_WORKER_INDEX": "0"}, "llm-1.llm.ns", 3) == "llm-1,llm-1-[1-2]"
    assert pod_hosts({"PET_NODE_RANK": "0", "JOB_COMPLETION_INDEX": "0"}, "ft-node-0-0.ft", 2) == "ft-node-0-[0-1]"
    assert pod_hosts({"PET_NODE_RANK": "0"}, "ft-node-0-0.ft", 2) is None  # no Job controller: not a pod
    assert pod_hosts({"KUBEFLOW_REPLICA_TYPE": "master", "KUBEFLOW_JOB_NAME": "j"}, "j-preflight", 1) == "j-master-0"


def test_no_pattern_no_guess() -> None:
    assert pod_hosts({"JOB_COMPLETION_INDEX": "0"}, "10.0.0.1", 4) is None
    assert pod_hosts({"JOB_COMPLETION_INDEX": "0"}, "master.example.com", 4) is None
    assert pod_hosts({"JOB_COMPLETION_INDEX": "0", "JOBSET_REPLICAS": "3"}, "pt-w-0-0.pt", 4) is None
    assert pod_hosts({}, "train-0.train", 4) is None  # not a pod: Slurm or torchrun name their nodes
    assert launch({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "node-0", "MASTER_PORT": "1"})["nodelist"] is None
