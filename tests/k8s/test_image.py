"""The container image users deploy, built from the `Dockerfile` by `scripts/image.sh` and run as
the init container of two emulated JobSet pods.

Real: the image (the Dockerfile built here by buildah, on python:3.11-slim where it can be pulled,
else on a Debian bookworm base made with debootstrap); its rootfs, python, package and user (the
image's own `USER`, 10001:10001, which `runAsNonRoot` accepts because it is numeric and not 0);
the processes; the network (each pod's container runs in a netns host: its own IP on a bridge);
the pod hostname; `/etc/hosts` and `resolv.conf` bind-mounted into the container from the files the
kubelet and cluster DNS would give (tests/k8s/pods.py); the init container's env as rendered from
the manifest (tests/k8s/render.py); the manifest's own init container command.

Not real: the API server, the scheduler and the kubelet (this test starts each pod's init
container and then its main container only if the init container exited 0; the main container is
a stand-in that leaves a mark). The runtime is `buildah run --isolation chroot`, not containerd
or CRI-O: no cgroups or seccomp, and `/dev` is read-only, so the termination log goes to a
mounted directory instead of the kubelet's `/dev/termination-log`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, TAG, NetnsHosts, unavailable
from tests.k8s.pods import NO_DNS, hosts_text
from tests.k8s.render import Job, Pod, init_env, render
from validator import __version__
from validator.targets import expand

pytestmark = [pytest.mark.root, pytest.mark.slow]
LIMIT_MB = 250
TERM = "/run/termination"  # where the termination log is mounted (the kubelet's is /dev/termination-log)


@dataclass
class Image:
    tag: str
    size: int  # bytes of its root filesystem (du -sb)
    listed: str  # its size as the engine lists it ("163 MB")
    rootfs: Path  # a mounted working container of it, for reading
    built: str  # image.sh's last line: engine, base, seconds


def buildah(*args: str, timeout: float = 120) -> str:
    p = subprocess.run(["buildah", *args], capture_output=True, text=True, timeout=timeout, check=False)
    assert p.returncode == 0, f"buildah {' '.join(args)}: {p.stderr[-2000:]}"
    return p.stdout.strip()


@pytest.fixture(scope="session")
def image() -> Iterator[Image]:
    """The image scripts/test.sh built (VALIDATOR_TEST_IMAGE), else one built here with
    scripts/image.sh once per session (its base cached between sessions) and removed after."""
    if os.geteuid() != 0:
        unavailable("needs root (buildah, debootstrap)")
    if not shutil.which("buildah"):
        unavailable("buildah not installed (scripts/setup.sh --full)")
    tag, built = os.environ.get("VALIDATOR_TEST_IMAGE", ""), "built by scripts/test.sh"
    if not tag:
        tag = f"localhost/cluster-validator:test-{TAG}"
        env = {**os.environ, "IMAGE_ENGINE": "buildah", "PYTHON": str(ROOT / ".venv" / "bin" / "python")}
        p = subprocess.run([str(ROOT / "scripts" / "image.sh"), tag], env=env, capture_output=True, text=True,
                           timeout=2000, check=False)  # fmt: skip
        if p.returncode == 2:  # nothing here can build it (no engine, not root): CI has them
            unavailable(p.stderr.strip())
        # a failed step (an unreachable Debian mirror included) fails the test, in CI and out of it
        assert p.returncode == 0, f"scripts/image.sh failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
        built = p.stdout.strip().splitlines()[-1]
    ctr = buildah("from", "-q", "--pull-never", tag)
    try:
        (listed,) = json.loads(buildah("images", "--json", tag))
        rootfs = Path(buildah("mount", ctr))
        size = int(subprocess.run(["du", "-sb", "--one-file-system", str(rootfs)], capture_output=True, text=True,
                                  timeout=120, check=True).stdout.split()[0])  # fmt: skip
        yield Image(tag, size, str(listed["size"]), rootfs, built)
    finally:
        buildah("rm", ctr)
        if not os.environ.get("VALIDATOR_TEST_IMAGE"):
            buildah("rmi", tag)


def run(img: Image, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``cmd`` in a fresh container of the image, as its own user, on this machine's network."""
    ctr = buildah("from", "-q", "--pull-never", img.tag)
    try:
        return subprocess.run(["buildah", "run", "--isolation", "chroot", ctr, "--", *cmd], capture_output=True,
                              text=True, timeout=timeout, check=False)  # fmt: skip
    finally:
        buildah("rm", ctr)


def test_image_is_lean_and_runs_as_a_numeric_non_root_user(image: Image, capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print(
            f"\n[image] {image.tag}: {image.size / 1e6:.0f} MB root filesystem ({image.listed} listed by buildah; "
            f"limit {LIMIT_MB} MB); {image.built}"
        )
    assert image.size <= LIMIT_MB * 1_000_000
    config = json.loads(buildah("inspect", "--type", "image", image.tag))["OCIv1"]["config"]
    # runAsNonRoot: the kubelet runs only an image whose user is numeric and not 0
    assert config["User"] == "10001:10001" and config["Entrypoint"] == ["validator"]
    assert run(image, "id", "-u").stdout.strip() == "10001"
    root = image.rootfs
    for d in ("usr/bin", "usr/local/bin", "opt/cluster-validator/bin"):
        tools = {p.name for p in (root / d).glob("*")} & {"gcc", "cc", "c++", "g++", "clang", "make", "pip", "pip3"}
        assert not tools, f"/{d}: {tools}"
    site = root / "opt/cluster-validator/lib/python3.11/site-packages"
    assert (site / "validator").is_dir() and not (site / "pip").exists()
    assert not [p for p in root.rglob("*.whl")] and not (root / "wheels").exists()
    assert not list((root / "var/lib/apt/lists").glob("*_Packages*")) and not list(root.glob("var/cache/apt/*.bin"))
    assert not list(root.glob("var/cache/apt/archives/*.deb")) and not (root / "root/.cache").exists()


def test_version_and_probe_inside_the_image(image: Image) -> None:
    v = run(image, "validator", "--version")
    assert (v.returncode, v.stdout.strip()) == (0, f"cluster-validator {__version__}"), v.stderr
    py = run(image, "python3", "-c", "import platform; print(platform.python_version())").stdout.strip()
    p = run(image, "validator", "probe", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    facts = json.loads(p.stdout)
    # the image's own python (not this machine's venv), and `ip` found for the interface facts
    assert facts["software"]["python"] == py and facts["software"]["torch"] is None
    assert facts["errors"] == {} and any(i["name"] == "lo" for i in facts["network"]["interfaces"])


@dataclass
class PodRun:
    pod: Pod
    rc: int
    report: dict[str, object] | None  # --format json on stdout
    err: str
    message: str | None  # the termination log
    main_started: bool


def run_pods(img: Image, hosts: NetnsHosts, job: Job, tmp: Path, env: dict[int, dict[str, str]]) -> list[PodRun]:
    """The job's first two pods, each in its netns host: the init container (the manifest's command
    in the image), then, as the kubelet would, the main container only where it exited 0."""
    ips = list(hosts.addrs)
    pods, running = job.pods[:2], []
    for pod in pods:
        d = tmp / pod.hostname
        (d / "term").mkdir(parents=True)
        (d / "term").chmod(0o777)  # written by uid 10001
        (d / "hosts").write_text(hosts_text(job, pod, ips[pod.index], ips, None, set()))
        (d / "resolv.conf").write_text(NO_DNS)
        penv = {**init_env(pod, ips[pod.index]), "NNODES": "2", **env.get(pod.index, {})}
        ctr = buildah("from", "-q", "--pull-never", "--dns", "none", img.tag)
        cmd = ["ip", "netns", "exec", hosts.names[pod.index], "buildah", "run", "--isolation", "chroot",
               "--network", "host", "--no-hosts", "--hostname", pod.hostname,
               "-v", f"{d / 'hosts'}:/etc/hosts:ro", "-v", f"{d / 'resolv.conf'}:/etc/resolv.conf:ro",
               "-v", f"{d / 'term'}:{TERM}", *(f"--env={k}={v}" for k, v in penv.items()), ctr, "--"]  # fmt: skip
        argv = [*pod.init["command"], f"{TERM}/log", "--timeout", "30"]  # the manifest ends with --termination-log
        proc = subprocess.Popen([*cmd, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        running.append((pod, d, ctr, cmd, proc))
    out = []
    try:
        for pod, d, _ctr, cmd, proc in running:
            try:
                stdout, err = proc.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, err = proc.communicate()
            if proc.returncode == 0:  # the kubelet starts the main container (here a stand-in)
                subprocess.run([*cmd, "sh", "-c", f"echo started > {TERM}/main"], timeout=60, check=False)
            log = d / "term" / "log"
            out.append(PodRun(pod, proc.returncode, json.loads(stdout) if stdout.strip() else None, err,
                              log.read_text() if log.exists() else None, (d / "term" / "main").exists()))  # fmt: skip
    finally:
        for _, _, ctr, _, proc in running:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            buildah("rm", ctr)
    return out


def test_jobset_pods_pass_with_the_image_and_the_main_containers_start(
    image: Image, netns_hosts: NetnsHosts, tmp_path: Path
) -> None:
    done = run_pods(image, netns_hosts, render("jobset"), tmp_path, {})
    assert [d.rc for d in done] == [0, 0], [d.err[-1500:] for d in done]
    for d in done:
        assert d.report is not None and d.report["participants"] == 2, d.err[-1500:]
        assert d.message is not None and d.message.startswith("preflight PASSED: 2/2 nodes")
        assert d.main_started
        assert sorted(expand(str(d.report["hosts"]))) == sorted(p.pod.hostname for p in done)


def test_a_failing_verdict_keeps_the_main_containers_from_starting(
    image: Image, netns_hosts: NetnsHosts, tmp_path: Path
) -> None:
    done = run_pods(image, netns_hosts, render("jobset"), tmp_path, {1: {"NNODES": "3"}})
    assert [d.rc for d in done] == [1, 1], [d.err[-1500:] for d in done]
    bad = done[1].pod.hostname
    for d in done:
        assert d.report is not None, d.err[-1500:]
        findings = d.report["findings"]
        assert isinstance(findings, list)
        named = [f for f in findings if f["code"] in ("RNK004", "RNK010")]
        assert named and all(f["hosts"] == bad for f in named), findings
        assert d.message is not None and d.message.startswith("preflight FAILED (exit 1)")
        assert not d.main_started
