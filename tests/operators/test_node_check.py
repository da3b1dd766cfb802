"""`validator node-check`: the NOD readings, the modes' exit codes, node-problem-detector as its
plugin runs it, and the Prometheus textfile.

The GPU and InfiniBand readings need hardware this machine lacks, so those tests read a sysfs
tree laid out like the kernel's (the same files, the same contents) from a temporary directory;
everything else runs the real command on this node.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT, VALIDATOR
from tests.factories import facts, rank_job, tweak
from validator.nodecheck import NODE_CODES, Readings, drain_reason, ib_ports, node_findings, node_report, pci_gpus

NPD_CONFIG = ROOT / "docs" / "examples" / "npd" / "validator-node-check.json"


def sysfs(root: Path, gpus: int = 0, switches: int = 0, ports: dict[str, tuple[str, str]] | None = None) -> Path:
    """A /sys with ``gpus`` NVIDIA 3D controllers, NVSwitches, an Intel NIC and IB ports."""
    devices = root / "bus" / "pci" / "devices"
    for n, (vendor, cls) in enumerate([("0x10de", "0x030200")] * gpus + [("0x10de", "0x068000")] * switches
                                      + [("0x8086", "0x020000")]):  # fmt: skip
        d = devices / f"0000:{n + 1:02x}:00.0"
        d.mkdir(parents=True)
        (d / "vendor").write_text(vendor + "\n")
        (d / "class").write_text(cls + "\n")
    for name, (state, phys) in (ports or {}).items():
        dev, port = name.split("/")
        p = root / "class" / "infiniband" / dev / "ports" / port
        p.mkdir(parents=True)
        (p / "state").write_text(state + "\n")
        (p / "phys_state").write_text(phys + "\n")
    return root


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*VALIDATOR, "node-check", *args], env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def profile(tmp_path: Path, text: str) -> str:
    p = tmp_path / "profile.yaml"
    p.write_text(text)
    return str(p)


def test_gpus_on_the_bus_but_not_in_the_driver(tmp_path: Path) -> None:
    root = sysfs(tmp_path, gpus=8, switches=4)
    assert len(pci_gpus(str(root))) == 8  # NVSwitches and the NIC are not GPUs
    found = node_findings(facts("gpu7", gpus=7), Readings(pci_gpus(str(root))))
    assert [(f.code, f.message, f.hosts) for f in found] == [("NOD001", "7/8 GPUs", ["gpu7"])]
    assert drain_reason(found) == "validator: NOD001 7/8 GPUs"
    assert node_findings(facts("gpu8", gpus=8), Readings(pci_gpus(str(root)))) == []
    gone = node_findings(facts("nodrv", gpus=0), Readings(pci_gpus(str(root))))
    assert [f.code for f in gone] == ["NOD001", "NOD003"] and "no driver answered" in gone[0].message


def test_ib_ports_down_but_not_disabled_ones(tmp_path: Path) -> None:
    root = sysfs(tmp_path, ports={"mlx5_0/1": ("4: ACTIVE", "5: LinkUp"), "mlx5_1/1": ("2: INIT", "5: LinkUp"),
                                  "mlx5_2/1": ("1: DOWN", "3: Disabled")})  # fmt: skip
    assert ib_ports(str(root)) == {"mlx5_0/1": "4: ACTIVE", "mlx5_1/1": "2: INIT"}
    found = node_findings(facts("ib1"), Readings(ib_ports=ib_ports(str(root))))
    assert [(f.code, f.actual) for f in found] == [("NOD002", "mlx5_1/1 INIT")]


def test_nccl_missing_on_a_gpu_node_and_clock() -> None:
    f = facts("g1", software={"nccl": None, "nccl_path": None})
    assert [x.code for x in node_findings(f, Readings(clock_synced=False))] == ["NOD003", "NOD004"]
    assert node_findings(facts("cpu", gpus=0, software={"nccl": None}), Readings(clock_synced=True)) == []


def test_node_report_runs_only_single_node_checks() -> None:
    """A lone rank of a bigger job must not raise the job-level findings (missing ranks, ...)."""
    f = facts("n1", launch={"launcher": "torchrun", "rank": 3, "world_size": 16, "local_world_size": 8})
    report = node_report(f, Readings(), None)
    assert {x.code for x in report.findings} <= set(NODE_CODES) and report.findings == []


def test_profile_min_nofile_holds_every_node() -> None:
    """SYS004 with a pinned ``min_nofile``: every node, not only the master (check and scan too)."""
    from tests.factories import check
    from validator.profiles import Profile

    job = tweak(rank_job(2, 2), 2, system={"nofile_soft": 1024})
    found = check(job, "SYS004", Profile("p.yaml", name="p", min_nofile=65536))
    assert [(f.hosts, f.actual) for f in found] == [(["node002"], "1024")]
    assert check(job, "SYS004", Profile("p.yaml", name="p", min_nofile=1024)) == []


def test_drain_reason_stays_short() -> None:
    f = facts("n1", gpus=2)
    many = node_findings(f, Readings(["a"] * 8, {f"mlx5_{i}/1": "1: DOWN" for i in range(9)}, False))
    reason = drain_reason(many)
    assert len(reason) <= 72 and reason.startswith("validator: NOD001 2/8 GPUs") and reason.endswith("(+2)")


@pytest.mark.parametrize("mode", ["slurm-prolog", "slurm-healthcheck"])
def test_slurm_modes_never_fail_for_their_own_errors(tmp_path: Path, mode: str) -> None:
    for args in (
        ["--profile", str(tmp_path / "missing.yaml")],
        ["--bogus-option"],
        ["--budget", "1e-9"],
        ["--budget", "-1"],
    ):
        p = run("--mode", mode, *args)
        assert p.returncode == 0, (args, p.stderr)
        assert "validator node-check: error:" in p.stderr and "Traceback" not in p.stderr
    p = run("--mode", mode, "-p", profile(tmp_path, "gpus_per_node: 8\n"))  # no --drain: the exit code says it
    assert p.returncode == 1 and "FAILED validator: PRF003 0 GPUs" in p.stderr


def npd_rule(profile_path: str) -> list[str]:
    """The example plugin config's command, with this checkout's validator and the given profile."""
    rule = json.loads(NPD_CONFIG.read_text())["rules"][0]
    assert rule["path"].endswith("/validator") and rule["args"][:3] == ["node-check", "--mode", "npd"]
    args = list(rule["args"])
    args[args.index("--profile") + 1] = profile_path
    return args


@pytest.mark.parametrize(
    ("text", "code", "line"),
    [
        ("name: fits\nmin_shm_mib: 1\n", 0, "OK: node-check of "),
        ("name: eight\ngpus_per_node: 8\n", 1, "PRF003 0 GPUs; profile eight expects 8"),
        ("name: huge-shm\nmin_shm_mib: 100000000\n", 1, "SYS001 /dev/shm is "),
        ("name: nofile\nmin_nofile: 100000000\n", 1, "SYS004 open-file limit "),
        ("name: bad\ngpus_per_nod: 8\n", 2, "UNKNOWN: "),
    ],
)
def test_npd_plugin_exit_code_and_first_line(tmp_path: Path, text: str, code: int, line: str) -> None:
    args = npd_rule(profile(tmp_path, text))
    p = subprocess.run([*VALIDATOR, *args], env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                       text=True, timeout=60, check=False)  # fmt: skip
    assert p.returncode == code, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith(line), p.stdout
    assert len(lines[0]) <= json.loads(NPD_CONFIG.read_text())["pluginConfig"]["max_output_length"]


def test_npd_budget_exceeded_is_unknown() -> None:
    p = run("--mode", "npd", "--budget", "1e-9")
    assert (p.returncode, p.stdout) == (2, "UNKNOWN: --budget 1e-09: facts not collected within the time budget\n")


@pytest.mark.parametrize(
    ("args", "code", "line"),
    [
        (["--bogus-option"], 2, "--bogus-option: unrecognized argument (see --help)"),
        (["--mode", "bogus"], 2, "--mode: invalid choice: 'bogus' (choose from 'report', 'slurm-prolog', "
                                 "'slurm-healthcheck', 'npd')"),
        (["--budget", "abc"], 2, "--budget: a number of seconds above 0 is needed, not 'abc'"),
        (["--budget", "-1"], 2, "--budget: a number of seconds above 0 is needed, not '-1'"),
        (["--budget", "nan"], 2, "--budget: a number of seconds above 0 is needed, not 'nan'"),
        (["--budget"], 2, "--budget: expected one argument"),
        (["--profile", "{tmp}/missing.yaml"], 2, "{tmp}/missing.yaml: cannot read profile: No such file or directory"),
        (["--profile", "{tmp}/bad.yaml"], 2, "{tmp}/bad.yaml:1: unknown key 'gpus_per_nod' (did you mean 'gpus_per_node'?)"),
        (["--budget", "1e-9"], 3, "--budget 1e-09: facts not collected within the time budget"),
    ],
)  # fmt: skip
def test_every_own_error_is_one_line_in_one_style(tmp_path: Path, args: list[str], code: int, line: str) -> None:
    """`validator node-check: error: WHERE: WHAT`, as UserError prints everywhere: no usage block,
    no second line; npd gets the same text after UNKNOWN:, the Slurm modes the same line and exit 0."""
    (tmp_path / "bad.yaml").write_text("gpus_per_nod: 8\n")
    args = [a.format(tmp=tmp_path) for a in args]
    line = line.format(tmp=tmp_path)
    p = run(*args)
    assert (p.returncode, p.stdout, p.stderr) == (code, "", f"validator node-check: error: {line}\n")
    p = run("--mode", "npd", *args)
    assert (p.returncode, p.stdout, p.stderr) == (2, f"UNKNOWN: {line}"[:200] + "\n", "")
    p = run("--mode", "slurm-prolog", *args)
    assert (p.returncode, p.stderr) == (0, f"validator node-check: error: {line}\n")


def test_report_mode_json_and_prom_file(tmp_path: Path) -> None:
    prom = tmp_path / "node.prom"
    p = run("-p", profile(tmp_path, "name: eight\ngpus_per_node: 8\nmin_shm_mib: 100000000\n"), "-f", "json",
            "--prom-file", str(prom))  # fmt: skip
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert {"PRF003", "SYS001"} <= {f["code"] for f in doc["findings"]}
    samples = {m.name: m.samples for m in text_string_to_metric_families(prom.read_text())}
    got = {(s.labels["code"], s.labels["severity"], s.labels["host"]) for s in samples["cluster_validator_findings"]}
    assert got == {(f["code"], f["severity"], f["hosts"]) for f in doc["findings"]}
    assert [s.value for s in samples["cluster_validator_pass"]] == [0.0]
    assert [s.value for s in samples["cluster_validator_exit_code"]] == [1.0]
    assert samples["cluster_validator_last_run_timestamp_seconds"][0].value > 1.7e9
    assert not list(tmp_path.glob("*.tmp*"))  # written atomically: no temporary file left behind
