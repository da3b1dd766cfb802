"""What the controllers make of the example manifests (docs/examples/k8s/), emulated: the pods
with their names, hostnames, labels and annotations, the env of the init container as the
kubelet resolves it (downward API, `$(VAR)` expansion, what each controller injects), and the
DNS names cluster DNS would publish while the pods are not Ready.

It encodes the controllers' behaviour as documented in docs/kubernetes.md (sources there); it
is not a Kubernetes, and it cannot tell whether a real controller still behaves that way.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "k8s"
FILES = {
    "pytorchjob-v1": "pytorchjob-v1.yaml",
    "trainjob-v2": "trainjob-v2.yaml",
    "jobset": "jobset.yaml",
    "indexed-job": "indexed-job.yaml",
    "leaderworkerset": "leaderworkerset.yaml",
}
NAMESPACE = "default"
DOMAIN = "cluster.local"
EnvEntry = dict[str, Any]


@dataclass
class Pod:
    index: int  # the node rank the controller's numbering gives it
    name: str
    hostname: str
    dns_hostname: bool  # spec.hostname set by the controller: <hostname>.<subdomain> gets a record
    subdomain: str | None
    labels: dict[str, str]
    annotations: dict[str, str]
    init: dict[str, Any]  # the init container, as in the manifest
    before: list[EnvEntry] = field(default_factory=list)  # controller env ahead of the container's own
    after: list[EnvEntry] = field(default_factory=list)  # controller env appended after it


@dataclass
class Service:
    name: str
    selector: dict[str, str]
    publish_not_ready: bool


@dataclass
class Job:
    workload: str
    pods: list[Pod]
    services: list[Service]
    master: str  # the name the init containers rendezvous on
    job_id: str  # the identity every pod presents
    docs: list[dict[str, Any]]


def load(workload: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / FILES[workload]).read_text()) if d]


def kind(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == name)


def services(docs: list[dict[str, Any]]) -> list[Service]:
    return [
        Service(d["metadata"]["name"], d["spec"].get("selector", {}), bool(d["spec"].get("publishNotReadyAddresses")))
        for d in docs
        if d["kind"] == "Service" and d["spec"].get("clusterIP") == "None"
    ]


def literal(name: str, value: object) -> EnvEntry:
    return {"name": name, "value": str(value)}


def completion_index() -> EnvEntry:
    # pkg/controller/job/indexed_job_utils.go: added to init containers and containers
    return {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations"
                                                                       "['batch.kubernetes.io/job-completion-index']"}}}  # fmt: skip


def indexed_pods(name: str, spec: dict[str, Any], uid: str, hostname_of: Any, extra: dict[str, str]) -> list[Pod]:
    """The pods of one Indexed Job: hostname from ``hostname_of(i)``, labels and annotations
    the Job controller sets (plus ``extra`` from JobSet)."""
    pods = []
    tmpl = spec["template"]["spec"]
    for i in range(int(spec["completions"])):
        labels = {"batch.kubernetes.io/job-name": name, "job-name": name, "batch.kubernetes.io/controller-uid": uid,
                  "controller-uid": uid, "batch.kubernetes.io/job-completion-index": str(i), **extra}  # fmt: skip
        annotations = {"batch.kubernetes.io/job-completion-index": str(i), **extra}
        host = hostname_of(i)
        init = tmpl["initContainers"][0]
        after = [] if any(e["name"] == "JOB_COMPLETION_INDEX" for e in init.get("env", [])) else [completion_index()]
        pods.append(Pod(i, f"{host}-x{i}q7z", host, True, tmpl.get("subdomain"), labels, annotations, init, [], after))
    return pods


def jobset_pods(js: dict[str, Any], uid: str) -> tuple[list[Pod], Service]:
    name = js["metadata"]["name"]
    network = js["spec"].get("network", {})
    subdomain = network.get("subdomain") or name
    pods: list[Pod] = []
    for rjob in js["spec"]["replicatedJobs"][:1]:  # the examples train in their first replicated job
        replicas = int(rjob.get("replicas", 1))
        spec = copy.deepcopy(rjob["template"]["spec"])
        spec["template"]["spec"]["subdomain"] = subdomain  # set by the JobSet controller
        per_job = int(spec["completions"])
        for j in range(replicas):
            extra = {"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/jobset-uid": uid,
                     "jobset.sigs.k8s.io/replicatedjob-name": rjob["name"],
                     "jobset.sigs.k8s.io/replicatedjob-replicas": str(replicas),
                     "jobset.sigs.k8s.io/job-index": str(j), "jobset.sigs.k8s.io/job-global-index": str(j)}  # fmt: skip
            child = f"{name}-{rjob['name']}-{j}"
            for p in indexed_pods(child, spec, f"{uid}-{j}", lambda i, c=child: f"{c}-{i}", extra):
                p.index += j * per_job
                pods.append(p)
    return pods, Service(
        subdomain, {"jobset.sigs.k8s.io/jobset-name": name}, network.get("publishNotReadyAddresses", True)
    )


def render(workload: str, uid: str = "3f0c-uid") -> Job:
    docs = load(workload)
    if workload == "indexed-job":
        job = kind(docs, "Job")
        name = job["metadata"]["name"]
        pods = indexed_pods(name, job["spec"], uid, lambda i: f"{name}-{i}", {})
        init_env = {e["name"]: e.get("value") for e in pods[0].init["env"]}
        return Job(workload, pods, services(docs), str(init_env["MASTER_ADDR"]), uid, docs)
    if workload == "jobset":
        js = kind(docs, "JobSet")
        pods, svc = jobset_pods(js, uid)
        name, rjob = js["metadata"]["name"], js["spec"]["replicatedJobs"][0]["name"]
        return Job(workload, pods, [svc], f"{name}-{rjob}-0-0.{name}", uid, docs)
    if workload == "trainjob-v2":
        runtime, tj = kind(docs, "ClusterTrainingRuntime"), kind(docs, "TrainJob")
        nodes = (tj["spec"].get("trainer") or {}).get("numNodes") or runtime["spec"]["mlPolicy"]["numNodes"]
        js = {"metadata": {"name": tj["metadata"]["name"]}, "spec": copy.deepcopy(runtime["spec"]["template"]["spec"])}
        rjob = js["spec"]["replicatedJobs"][0]["template"]["spec"]
        rjob.update({"parallelism": nodes, "completions": nodes, "completionMode": "Indexed"})
        pods, svc = jobset_pods(js, uid)  # PET_* go to the `node` container only, not to init containers
        name = tj["metadata"]["name"]
        return Job(workload, pods, [svc], f"{name}-{js['spec']['replicatedJobs'][0]['name']}-0-0.{name}", uid, docs)
    if workload == "pytorchjob-v1":
        pj = kind(docs, "PyTorchJob")
        name = pj["metadata"]["name"]
        pods, svcs = [], services(docs)
        for rtype in ("Master", "Worker"):
            spec = pj["spec"]["pytorchReplicaSpecs"][rtype]
            for i in range(int(spec["replicas"])):
                pod = f"{name}-{rtype.lower()}-{i}"
                labels = {"training.kubeflow.org/job-name": name, "training.kubeflow.org/operator-name":
                          "pytorchjob-controller", "training.kubeflow.org/replica-type": rtype.lower(),
                          "training.kubeflow.org/replica-index": str(i)}  # fmt: skip
                tmpl = spec["template"]["spec"]
                pods.append(
                    Pod(len(pods), pod, pod, False, tmpl.get("subdomain"), labels, {}, tmpl["initContainers"][0])
                )
                # the operator's own Service per replica: headless, not publishing not-ready pods
                svcs.append(Service(pod, {k: v for k, v in labels.items() if "operator" not in k}, False))
        return Job(workload, pods, svcs, f"{name}-preflight", name, docs)
    if workload == "leaderworkerset":
        lws = kind(docs, "LeaderWorkerSet")
        name, size = lws["metadata"]["name"], int(lws["spec"]["leaderWorkerTemplate"]["size"])
        tmpl = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
        pods = []
        for w in range(size):
            pod = name + "-0" + (f"-{w}" if w else "")
            labels = {"leaderworkerset.sigs.k8s.io/name": name, "leaderworkerset.sigs.k8s.io/group-index": "0",
                      "leaderworkerset.sigs.k8s.io/worker-index": str(w), "leaderworkerset.sigs.k8s.io/group-key": uid}  # fmt: skip
            annotations = {"leaderworkerset.sigs.k8s.io/size": str(size)}
            # pod_utils.go AddLWSVariables: put first, replacing the container's own same-named entries
            before = [literal("LWS_LEADER_ADDRESS", f"{name}-0.{name}.{NAMESPACE}"), literal("LWS_GROUP_SIZE", size),
                      literal("LWS_WORKER_INDEX", w)]  # fmt: skip
            pods.append(Pod(w, pod, pod, True, name, labels, annotations, tmpl["initContainers"][0], before))
        return Job(workload, pods, [Service(name, {"leaderworkerset.sigs.k8s.io/name": name}, True)],
                   f"{name}-0.{name}.{NAMESPACE}", uid, docs)  # fmt: skip
    raise KeyError(workload)


FIELD = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")


def field_value(pod: Pod, path: str, ip: str) -> str:
    m = FIELD.fullmatch(path)
    if m:
        return (pod.labels if m.group(1) == "labels" else pod.annotations).get(m.group(2), "")
    simple = {"metadata.name": pod.name, "metadata.namespace": NAMESPACE, "status.podIP": ip}
    if path not in simple:
        raise KeyError(f"fieldRef {path} is not emulated")
    return simple[path]


def expand(text: str, env: dict[str, str]) -> str:
    """The kubelet's $(VAR) expansion: defined names are replaced, $$ escapes, others stay."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: "$" if m.group(0) == "$$" else
                  env.get(m.group(1), m.group(0)), text)  # fmt: skip


def init_env(pod: Pod, ip: str, entries: list[EnvEntry] | None = None) -> dict[str, str]:
    """The init container's environment as the process sees it: controller-injected entries and
    the container's own, resolved in order, plus what the kubelet and the runtime always add."""
    own = entries if entries is not None else pod.init.get("env", [])
    taken = {e["name"] for e in pod.before}
    env: dict[str, str] = {}
    for e in [*pod.before, *(e for e in own if e["name"] not in taken), *pod.after]:
        if "valueFrom" in e:
            env[e["name"]] = field_value(pod, e["valueFrom"]["fieldRef"]["fieldPath"], ip)
        else:
            env[e["name"]] = expand(str(e.get("value", "")), env)
    return {"HOSTNAME": pod.hostname, "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443", **env}


def forms(name: str) -> list[str]:
    """How a pod may spell a name that cluster DNS answers (search path: <ns>.svc.<domain>)."""
    return [name, f"{name}.{NAMESPACE}", f"{name}.{NAMESPACE}.svc", f"{name}.{NAMESPACE}.svc.{DOMAIN}"]


def published(job: Job, ips: list[str], publish: bool | None = None) -> dict[str, str]:
    """Name -> address that cluster DNS answers while the pods are not Ready. A headless
    Service publishes them only with publishNotReadyAddresses (``publish`` overrides it)."""
    out: dict[str, str] = {}
    for svc in job.services:
        if not (svc.publish_not_ready if publish is None else publish):
            continue
        chosen = [p for p in job.pods if all(p.labels.get(k) == v for k, v in svc.selector.items())]
        if len(chosen) == 1:  # the Service's own name (several pods: several records, unused here)
            out.update(dict.fromkeys(forms(svc.name), ips[chosen[0].index]))
        for p in chosen:
            if p.dns_hostname and p.subdomain == svc.name:
                out.update(dict.fromkeys(forms(f"{p.hostname}.{svc.name}"), ips[p.index]))
    return out


def kubelet_hosts(pod: Pod, ip: str) -> str:
    """The pod's /etc/hosts as the kubelet writes it (its own name only)."""
    own = f"{pod.hostname}.{pod.subdomain}.{NAMESPACE}.svc.{DOMAIN}\t{pod.hostname}" if pod.subdomain else pod.hostname
    return f"# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n{ip}\t{own}\n"
