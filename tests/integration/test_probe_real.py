"""`validator probe` under real launchers and on real (namespace) hosts, then `validator check`:
healthy jobs must pass (false alarms cost trust) and broken ones must name the culprit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import NetnsHosts, free_port
from validator.model import Report

BIN = Path(sys.executable).parent
VALIDATOR = str(BIN / "validator")


def check(files: list[Path], *args: str) -> tuple[int, Report]:
    p = subprocess.run(
        [VALIDATOR, "check", *map(str, files), "-f", "json", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert p.returncode in (0, 1), p.stderr
    return p.returncode, Report.from_json(json.loads(p.stdout))


def clean_env(**extra: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}, "OMP_NUM_THREADS": "1", **extra}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["standalone", "static-2-nodes"])
def test_probe_inside_real_torchrun_workers_passes(tmp_path: Path, mode: str) -> None:
    """c10d/static workers on one host get MASTER_ADDR=localhost or 127.0.0.1 and their agent holds
    MASTER_PORT: neither is a problem, and check must say so (exit 0)."""
    dump = f"exec {VALIDATOR} probe --json > {tmp_path}/rank$RANK.json"
    common = ["--nproc-per-node=2", "--no-python", "sh", "-c", dump]
    if mode == "standalone":
        cmds = [[str(BIN / "torchrun"), "--standalone", *common]]
    else:
        port = str(free_port())
        cmds = [
            [
                str(BIN / "torchrun"),
                "--nnodes=2",
                f"--node-rank={n}",
                "--master-addr=127.0.0.1",
                f"--master-port={port}",
                "--rdzv-conf=timeout=60",
                *common,
            ]
            for n in (0, 1)
        ]
    procs = [
        subprocess.Popen(c, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for c in cmds
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    files = sorted(tmp_path.glob("rank*.json"))
    assert len(files) == 2 * len(cmds)
    rc, report = check(files)
    assert [f"{f.code} {f.message}" for f in report.findings] == [] and rc == 0
    facts = json.loads(files[0].read_text())
    assert facts["launch"]["launcher"] == "torchrun" and facts["launch"]["mode"] == "rank"


def test_wrapped_torchrun_commands_with_different_nnodes(tmp_path: Path) -> None:
    """The silent failure of ../shared/logs/torch-nnodes_mismatch.log: --nnodes=2 on the master and
    --nnodes=3 on node 1 run with the master's value and exit 0. The probe of each wrapped command
    catches it before launch."""
    files = []
    for node, nnodes in ((0, 2), (1, 3)):
        argv = [
            "torchrun",
            f"--nnodes={nnodes}",
            "--nproc_per_node=2",
            f"--node_rank={node}",
            "--master_addr=127.0.0.1",
            "--master_port=29511",
            "train.py",
        ]
        out = subprocess.run(
            [VALIDATOR, "probe", "--json", "--no-port-probe", "--", *argv],
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        path = tmp_path / f"node{node}.json"
        path.write_text(out)
        files.append(path)
    rc, report = check(files)
    assert rc == 1
    opts = [f for f in report.findings if f.code == "RNK009"]
    assert len(opts) == 1 and "--nnodes=3" in opts[0].message and opts[0].expected == "2"
    node1 = json.loads(files[1].read_text())["launch"]
    assert (node1["mode"], node1["node_rank"], node1["sources"]["nnodes"]) == ("node", 1, "torchrun:--nnodes")


@pytest.mark.root
def test_namespace_hosts(netns_hosts: NetnsHosts, tmp_path: Path) -> None:
    """Four hosts, each a network namespace with its own hostname and address (tests/conftest.py):
    a healthy CPU job passes; then one host binds Gloo to lo and another points MASTER_ADDR at
    localhost, and each is named."""

    def probe_all(tweaks: dict[int, dict[str, str]]) -> list[Path]:
        files = []
        for i in range(4):
            env = {
                "RANK": str(i),
                "WORLD_SIZE": "4",
                "MASTER_ADDR": netns_hosts.names[0],
                "MASTER_PORT": "29512",
                **tweaks.get(i, {}),
            }
            cmd = netns_hosts.exec(i, "env", *[f"{k}={v}" for k, v in env.items()], VALIDATOR, "probe", "--json")
            out = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=60, check=True).stdout
            path = tmp_path / f"{'-'.join(map(str, tweaks))}rank{i}.json"
            path.write_text(out)
            files.append(path)
        return files

    healthy = probe_all({})
    facts = [json.loads(f.read_text()) for f in healthy]
    assert [f["host"] for f in facts] == netns_hosts.names
    assert [f["network"]["gloo"]["addr"] for f in facts] == netns_hosts.addrs
    assert facts[0]["network"]["master"]["local"] and not facts[1]["network"]["master"]["local"]
    rc, report = check(healthy)
    assert [f"{f.code} {f.message}" for f in report.findings] == [] and rc == 0

    broken = probe_all({1: {"GLOO_SOCKET_IFNAME": "lo"}, 2: {"MASTER_ADDR": "localhost"}})
    rc, report = check(broken)
    named = {f.code: (f.hosts, f.ranks) for f in report.findings}
    assert rc == 1
    assert named["NET003"] == ([netns_hosts.names[1]], [1])
    assert named["RDZ004"] == ([netns_hosts.names[2]], [2])


@pytest.mark.parametrize(
    ("endpoint", "master", "error"),
    [("::1:29512", ("::1", 29512), False), ("[::1]:29512", ("::1", 29512), False), ("fd00::1", ("fd00:", 1), True)],
)
def test_an_ipv6_rendezvous_endpoint_is_where_torch_connects(
    tmp_path: Path, endpoint: str, master: tuple[str, int], error: bool
) -> None:
    """torchrun writes an IPv6 --master-addr as ``::1:29512`` (host ::1, port 29512: a healthy job the
    validator once blocked as an unresolvable name) and reads a bare ``fd00::1`` as host ``fd00:`` port 1,
    a job that never rendezvous (the validator once passed it): RDZ005 then says to write it in brackets."""
    files = []
    for node in (0, 1):
        argv = [
            "torchrun",
            "--nnodes=2",
            "--nproc-per-node=1",
            f"--node-rank={node}",
            f"--rdzv-endpoint={endpoint}",
            "x.py",
        ]
        out = subprocess.run([VALIDATOR, "probe", "--json", "--no-port-probe", "--", *argv], env=clean_env(),
                             capture_output=True, text=True, timeout=60, check=True).stdout  # fmt: skip
        (path := tmp_path / f"node{node}.json").write_text(out)
        files.append(path)
        launch = json.loads(out)["launch"]
        assert (launch["master_addr"], launch["master_port"]) == master
    rc, report = check(files)
    assert [f.code for f in report.findings] == (["RDZ005"] if error else [])
    assert rc == (1 if error else 0)
    if error:
        assert "[fd00::1]:PORT" in report.findings[0].fix and report.findings[0].hosts


def _probe_nodes(tmp_path: Path, commands: list[list[str]], **env: str) -> tuple[list[Path], str]:
    files, errors = [], ""
    for node, argv in enumerate(commands):
        p = subprocess.run([VALIDATOR, "probe", "--json", "--no-port-probe", "--", *argv], env=clean_env(**env),
                           capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
        (path := tmp_path / f"node{node}.json").write_text(p.stdout)
        files.append(path)
        errors += p.stderr
    return files, errors


@pytest.mark.parametrize(
    ("a", "b", "codes"),
    [
        ("localhost", "localhost:29400", []),  # 29400: torch's c10d default port
        ("LOCALHOST:29514", "localhost:29514", []),  # host names are case-insensitive
        ("127.0.0.1:29514", "localhost:29514", []),  # two names of one address
        ("127.0.0.1:29514", "127.0.0.1:29515", ["RDZ002"]),  # a real drift: another port
        ("127.0.0.1:29514", None, ["RDZ002"]),  # no endpoint: torch's localhost:29400
    ],
)
def test_a_c10d_endpoint_is_compared_as_torch_reads_it(tmp_path: Path, a: str, b: str | None, codes: list[str]) -> None:
    """Two nodes that name one c10d endpoint in two spellings meet in one store: RNK009 once compared the
    text and blocked them (in `check` and the live preflight); the RDZ checks compare what it resolves to."""
    base = ["torchrun", "--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d", "--rdzv-id=j7"]
    files, _ = _probe_nodes(
        tmp_path, [[*base, f"--rdzv-endpoint={e}", "x.py"] if e else [*base, "x.py"] for e in (a, b)]
    )
    rc, report = check(files)
    assert [f.code for f in report.findings] == codes and rc == (1 if codes else 0)


def test_a_static_endpoint_without_a_port_is_an_error(tmp_path: Path) -> None:
    """torch's static handler raises "Port is absent in endpoint" on every node; the validator once passed it."""
    argv = ["torchrun", "--nnodes=2", "--nproc-per-node=1", "--rdzv-endpoint=127.0.0.1", "x.py"]
    files, _ = _probe_nodes(tmp_path, [[*argv[:3], f"--node-rank={n}", *argv[3:]] for n in (0, 1)])
    rc, report = check(files)
    assert rc == 1 and [f.code for f in report.findings] == ["RDZ007"]
    assert "without a port" in report.findings[0].message and "HOST:PORT" in report.findings[0].fix


def test_a_malformed_master_name_is_named_without_a_traceback(tmp_path: Path) -> None:
    """``gpu..a01`` (an empty label) is refused by Python's idna codec before any lookup: the probe once
    printed a thread's traceback and the facts said the lookup had timed out."""
    files, errors = _probe_nodes(tmp_path, [["python", "x.py"]], MASTER_ADDR="gpu..a01", MASTER_PORT="29516",
                                 RANK="0", WORLD_SIZE="2")  # fmt: skip
    assert "Traceback" not in errors, errors
    rc, report = check(files)
    found = [f for f in report.findings if f.code == "RDZ005"]
    assert rc == 1 and found and "not a valid host name" in found[0].message and "timed out" not in found[0].message


def test_a_wrapped_launch_is_checked_as_the_launch(tmp_path: Path) -> None:
    """`apptainer exec img.sif torchrun --node-rank=0` on both nodes: the wrapper once hid torchrun, and the
    duplicate node rank passed; the wrapper is seen through and it is named."""
    argv = ["apptainer", "exec", "--nv", "img.sif", "torchrun", "--nnodes=2", "--nproc-per-node=1", "--node-rank=0",
            "--master-addr=127.0.0.1", "--master-port=29517", "x.py"]  # fmt: skip
    files, _ = _probe_nodes(tmp_path, [argv, argv])
    rc, report = check(files)
    assert rc == 1 and [f.code for f in report.findings] == ["RNK006", "RNK007"]  # node rank 0 twice, 1 missing


def test_the_commands_env_words_are_the_jobs_environment(tmp_path: Path) -> None:
    """`env NCCL_SOCKET_IFNAME=lo HF_TOKEN=… torchrun …` (as `srun env … torchrun` sets a job's variables):
    the job's NCCL reads lo, whatever the shell exported (here an interface no node has). The facts
    carry the job's value, the check is of it, and the secret name is not collected."""
    secret = "hf_" + "q" * 34

    def argv(n: int) -> list[str]:
        return ["env", "NCCL_SOCKET_IFNAME=lo", f"HF_TOKEN={secret}", "-u", "GLOO_SOCKET_IFNAME", "torchrun",
                "--nnodes=2", "--nproc-per-node=1", f"--node-rank={n}", "--master-addr=127.0.0.1",
                "--master-port=29517", "x.py", "env", "NCCL_SOCKET_IFNAME=eth9"]  # fmt: skip

    files, errors = _probe_nodes(tmp_path, [argv(0), argv(1)], NCCL_SOCKET_IFNAME="nosuch0", GLOO_SOCKET_IFNAME="x")
    docs = [json.loads(f.read_text()) for f in files]
    assert [(d["env"].get("NCCL_SOCKET_IFNAME"), d["env"].get("GLOO_SOCKET_IFNAME")) for d in docs] == [
        ("lo", None)
    ] * 2
    assert not any(secret in f.read_text() for f in files) and secret not in errors
    _, report = check(files)  # the two "nodes" are one host: other findings say so
    assert not [f for f in report.findings if "nosuch0" in f.message or "eth9" in f.message], report.findings
