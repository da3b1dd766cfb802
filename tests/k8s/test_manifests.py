"""The example manifests (docs/examples/k8s/) and the Dockerfile: parsed, required fields
present, and the env each init container relies on is exactly what the detection reads (the
controller's view of each pod rendered by tests/k8s/render.py, then parse_launch on it)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import tomllib

from tests.conftest import ROOT
from tests.factories import node_job, tweak
from tests.k8s.render import FILES, EnvEntry, Job, init_env, published, render
from validator.agent.probe import filtered_env
from validator.checks import run_checks
from validator.facts.command import parse_command
from validator.facts.launch import parse_launch
from validator.targets import expand

WORKLOADS = list(FILES)
IPS = ["10.9.0.11", "10.9.0.12", "10.9.0.13", "10.9.0.14"]
LAUNCHER = {"pytorchjob-v1": "kubeflow", "trainjob-v2": "trainer", "jobset": "jobset", "indexed-job": "indexed-job",
            "leaderworkerset": "lws"}  # fmt: skip
CONTRACT = ("launcher", "mode", "node_rank", "nnodes", "world_size", "local_world_size", "master_addr", "master_port",
            "job_id", "nodelist")  # fmt: skip
TRAINER_PORT = 29500  # Trainer's constants.ContainerTrainerPort: the controller adds this port itself


def pod_templates(job: Job) -> list[dict[str, Any]]:
    """Every pod spec the manifest defines (v1 has two replica specs)."""
    d = job.docs
    kinds = {x["kind"]: x for x in d}
    if "PyTorchJob" in kinds:
        return [r["template"]["spec"] for r in kinds["PyTorchJob"]["spec"]["pytorchReplicaSpecs"].values()]
    if "Job" in kinds:
        return [kinds["Job"]["spec"]["template"]["spec"]]
    if "JobSet" in kinds:
        return [r["template"]["spec"]["template"]["spec"] for r in kinds["JobSet"]["spec"]["replicatedJobs"]]
    if "ClusterTrainingRuntime" in kinds:
        rjobs = kinds["ClusterTrainingRuntime"]["spec"]["template"]["spec"]["replicatedJobs"]
        return [r["template"]["spec"]["template"]["spec"] for r in rjobs]
    return [kinds["LeaderWorkerSet"]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]]


def contract(env: dict[str, str]) -> tuple[Any, ...]:
    launch = parse_launch(filtered_env(env), None)
    return tuple(launch[k] for k in CONTRACT)  # type: ignore[literal-required]


@pytest.mark.parametrize("workload", WORKLOADS)
def test_manifest_has_the_preflight_init_container(workload: str) -> None:
    job = render(workload)
    for spec in pod_templates(job):
        (init,) = spec["initContainers"]
        assert init["name"] == "preflight" and init["image"]
        assert init["command"][:2] == ["validator", "preflight"]
        assert "--timeout" in init["command"] and init["command"][-1] == "--termination-log"
        assert {"cpu", "memory"} <= set(init["resources"]["requests"]) and "memory" in init["resources"]["limits"]
        assert init["securityContext"]["runAsNonRoot"] is True
        assert init["securityContext"]["allowPrivilegeEscalation"] is False
        trainer = spec["containers"][0]
        assert trainer["image"] and trainer["command"][0] == "torchrun"  # never plain python (ENV006)
        if workload != "trainjob-v2":  # a TrainJob sets resourcesPerNode instead
            assert (
                trainer["resources"]["requests"]["nvidia.com/gpu"] == trainer["resources"]["limits"]["nvidia.com/gpu"]
            )


@pytest.mark.parametrize("workload", WORKLOADS)
def test_master_name_resolves_while_no_pod_is_ready(workload: str) -> None:
    """The Service the master's name belongs to publishes not-ready pods (the manifest's own
    Service, JobSet's network setting, or the Service LWS creates)."""
    job = render(workload)
    assert published(job, IPS).get(job.master) == IPS[0]
    assert job.master not in published(job, IPS, publish=False)
    for doc in job.docs:
        if doc["kind"] == "Service":
            assert doc["spec"]["clusterIP"] == "None" and doc["spec"]["publishNotReadyAddresses"] is True
        if doc["kind"] in ("JobSet", "ClusterTrainingRuntime"):
            spec = doc["spec"] if doc["kind"] == "JobSet" else doc["spec"]["template"]["spec"]
            assert spec["network"]["publishNotReadyAddresses"] is True


@pytest.mark.parametrize("workload", WORKLOADS)
def test_rendered_env_gives_every_pod_its_place(workload: str) -> None:
    job = render(workload)
    hostnames = [p.hostname for p in job.pods]
    port = int(init_env(job.pods[0], IPS[0]).get("MASTER_PORT") or init_env(job.pods[0], IPS[0])["PET_MASTER_PORT"])
    for pod in job.pods:
        launch = parse_launch(filtered_env(init_env(pod, IPS[pod.index])), None)
        assert (launch["launcher"], launch["mode"], launch["invalid"]) == (LAUNCHER[workload], "node", {})
        assert (launch["node_rank"], launch["nnodes"]) == (pod.index, len(job.pods))
        assert (launch["master_addr"], launch["master_port"]) == (job.master, port)
        assert launch["job_id"] == job.job_id
        assert launch["nodelist"] and expand(launch["nodelist"]) == hostnames
    training_ports = {p["containerPort"] for s in pod_templates(job) for p in s["containers"][0].get("ports", [])}
    assert port in training_ports | ({TRAINER_PORT} if workload == "trainjob-v2" else set())


def perturbed(entry: EnvEntry, value: str) -> EnvEntry:
    new = str(int(value) + 1) if value.isdigit() else value + "x"
    return {"name": entry["name"], "value": new}


@pytest.mark.parametrize("workload", WORKLOADS)
def test_every_variable_the_manifest_sets_is_read_by_the_detection(workload: str) -> None:
    """Change one variable of the init container at a time (where the manifest defines it, so
    that `$(VAR)` expansions follow): the launch contract of some pod must change. A variable
    the detection did not read, or that the agent's allowlist drops, would change nothing."""
    job = render(workload)
    entries: list[EnvEntry] = job.pods[0].init["env"]
    injected = {e["name"] for p in job.pods for e in p.before}
    checked = 0
    for n, entry in enumerate(entries):
        if entry["name"] in injected:
            continue  # the controller's own value replaces it (the LWS_WORKER_INDEX fallback)
        changed = False
        for pod in job.pods:
            value = init_env(pod, IPS[pod.index])[entry["name"]]
            edited = [*entries[:n], perturbed(entry, value), *entries[n + 1 :]]
            if contract(init_env(pod, IPS[pod.index], edited)) != contract(init_env(pod, IPS[pod.index])):
                changed = True
                break
        assert changed, f"{workload}: {entry['name']} is set but nothing reads it"
        checked += 1
    assert checked >= 2


def test_pytorchjob_training_command_is_not_the_plain_python_trap() -> None:
    """The v1 example's training container, with the env the operator injects into it
    (setPodEnv), passes ENV006; the same pods started with plain python do not."""
    job = render("pytorchjob-v1")
    spec = pod_templates(job)[0]
    nproc = int(next(d for d in job.docs if d["kind"] == "PyTorchJob")["spec"]["nprocPerNode"])
    port = spec["containers"][0]["ports"][0]["containerPort"]

    def facts(argv: list[str]) -> list[Any]:
        pods = node_job(len(job.pods), 1, gpus=0)
        for p in job.pods:
            env = filtered_env({"MASTER_ADDR": "bert-master-0", "MASTER_PORT": str(port), "PET_MASTER_ADDR": "bert-master-0",
                                "PET_MASTER_PORT": str(port), "WORLD_SIZE": str(len(job.pods) * nproc),
                                "RANK": str(p.index), "PET_NODE_RANK": str(p.index), "PET_NNODES": str(len(job.pods)),
                                "PET_NPROC_PER_NODE": str(nproc), "PYTHONUNBUFFERED": "0"})  # fmt: skip
            pods = tweak(pods, p.index, env=env, launch=dict(parse_launch(env, parse_command(argv))))
        return pods

    example = spec["containers"][0]["command"]
    assert [f.code for f in run_checks(facts(example)) if f.code == "ENV006"] == []
    assert [f.code for f in run_checks(facts(["python", "/workspace/train.py"])) if f.code == "ENV006"] == ["ENV006"]


def dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments), continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, args = line.partition(" ")
            out.append((op.upper(), args.strip()))
    return out


def test_dockerfile_runs_the_validator_as_a_numeric_non_root_user() -> None:
    lines = dockerfile()
    # every stage starts from the BASE build argument (scripts/image.sh passes a debootstrap base
    # where it cannot be pulled), whose default is the slim Python image
    froms = [a.split()[0] for op, a in lines if op == "FROM"]
    bases = [a.partition("=")[2] for op, a in lines if op == "ARG" and a.startswith("BASE=")]
    assert froms and set(froms) == {"${BASE}"} and len(bases) == 1
    assert re.fullmatch(r"python:3\.\d+-slim(-\w+)?", bases[0])
    users = [a for op, a in lines if op == "USER"]
    assert users and re.fullmatch(r"\d+(:\d+)?", users[-1]) and not users[-1].startswith("0")
    # the last USER comes after the last RUN: nothing runs as root at run time
    last_run = max(i for i, (op, _) in enumerate(lines) if op == "RUN")
    assert max(i for i, (op, _) in enumerate(lines) if op == "USER") > last_run
    (entry,) = [json.loads(a) for op, a in lines if op == "ENTRYPOINT"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert entry == ["validator"] and entry[0] in scripts
    runs = " ".join(a for op, a in lines if op == "RUN")
    assert not re.search(r"\b(gcc|g\+\+|clang|build-essential|make|python3?-dev)\b", runs)
    assert "install -q --no-index" in runs and "useradd --uid " + users[-1].split(":")[0] in runs
