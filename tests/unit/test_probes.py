"""The node probes' parts: the probe programs (real python3 processes), the judgement over the
peers (median and MAD, a factor and an absolute gap, confirmation against controls), answers
from hostile nodes, and the exclusion forms in every format."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from validator.model import Finding, Report, Severity
from validator.probes import compute, judge, memory, rounds
from validator.probes.exclude import exclusion, lines
from validator.report import RenderOptions, render

PROGRAMS = {"compute": compute.__file__, "memory": memory.__file__}


def run(kind: str, *args: str) -> tuple[int, dict[str, object]]:
    p = subprocess.run(["python3", PROGRAMS[kind], *args], capture_output=True, text=True, timeout=120, check=False)
    assert p.stderr == ""
    out = p.stdout.strip().splitlines()
    assert len(out) == 1, p.stdout
    return p.returncode, json.loads(out[0])


@pytest.mark.parametrize(("kind", "figure"), [("compute", "gflops"), ("memory", "gbps")])
def test_each_probe_program_answers_with_its_figure_and_samples(kind: str, figure: str) -> None:
    code, doc = run(kind, "3", "0.05")
    assert code == 0 and doc["probe"] == kind
    rows = doc["devices"]
    assert isinstance(rows, list) and rows
    row = rows[0]
    assert len(row["samples"]) == 3 and row[figure] > 0
    assert row[figure] == sorted(row["samples"])[-2]  # the second-fastest sample
    got = rounds.figures(kind, doc)  # type: ignore[arg-type]
    assert isinstance(got, dict) and list(got.values()) == [row[figure]]


def test_the_compute_probe_without_torch_is_a_pure_python_multiply() -> None:
    _, doc = run("compute", "1", "0.01")  # the nodes' python3 here has no torch
    assert doc["devices"][0]["engine"] == "python" and doc["devices"][0]["size"] == compute.PY_SIZE  # type: ignore[index]


def test_bad_probe_arguments_are_one_json_line_and_exit_2() -> None:
    code, doc = run("memory", "many")
    assert code == 2 and "usage: memory.py" in str(doc["error"])


def test_a_node_under_the_median_by_the_factor_and_the_gap_is_a_suspect() -> None:
    med, mad, slow = judge.suspects({"a": 10.0, "b": 10.2, "c": 9.9, "d": 10.1, "e": 4.0}, "host copy")
    assert (med, slow) == (10.0, {"e"}) and mad == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("figures", "key"),
    [
        ({"a": 10.0, "b": 10.1, "c": 9.9, "e": 7.0}, "host copy"),  # 1.43x: within the factor
        ({"a": 0.0030, "b": 0.0030, "c": 0.0031, "e": 0.0019}, "cpu python"),  # 1.6x, but under the floor
        ({"a": 10.0, "b": 14.0, "c": 6.0, "d": 12.0, "e": 8.0, "f": 5.5}, "host copy"),  # within the peers' spread
        ({"a": 10.0, "e": 1.0}, "host copy"),  # two nodes: no median to compare with
    ],
)
def test_noise_is_not_a_suspect(figures: dict[str, float], key: str) -> None:
    assert judge.suspects(figures, key)[2] == set()


def test_a_confirmation_compares_with_the_more_lenient_of_the_median_and_the_controls() -> None:
    assert judge.confirmed(3.0, 10.0, [9.5, 9.8], "host copy")
    assert not judge.confirmed(3.0, 10.0, [4.0, 9.8], "host copy")  # a control as slow: the machine was busy
    assert not judge.confirmed(9.0, 10.0, [], "host copy")


def test_answers_from_hostile_nodes_give_only_well_formed_figures() -> None:
    rows = [{"device": "cpu", "engine": "python", "gflops": float("nan")}, {"device": "x", "engine": "y", "gflops": True},
            {"device": "g", "engine": "e", "gflops": -1}, {"device": "ok", "engine": "python", "gflops": 0.5}, "junk"]  # fmt: skip
    assert rounds.figures("compute", {"devices": rows}) == {"ok python": 0.5}
    assert rounds.figures("compute", {"devices": [{"device": "d", "engine": "e", "gflops": 1.0}] * 100}) == {"d e": 1.0}
    assert rounds.figures("compute", {"error": "MemoryError: x" * 100}) == ("MemoryError: x" * 100)[:300]
    assert rounds.figures("memory", {"devices": "no"}) == "the memory probe gave no figures"
    assert rounds.figures("memory", "timeout: no answer") == "timeout: no answer"


def test_the_exclusion_takes_the_named_out_in_each_launchers_form() -> None:
    base = [f"gpu{i:03d}" for i in range(1, 9)]
    doc = exclusion(base, ["gpu003", "gpu007"], {h: 8 for h in base})
    assert doc["keep"] == [h for h in base if h not in ("gpu003", "gpu007")]
    s = doc["slurm"]
    assert s["exclude"] == "--exclude=gpu[003,007]" and s["nodes"] == 6 and s["nodelist"] == "gpu[001-002,004-006,008]"
    assert shlex.split(s["srun"])[:3] == ["srun", "--nodes=6", "--nodelist=gpu[001-002,004-006,008]"]
    assert shlex.split(s["sbatch"])[:2] == ["sbatch", "--exclude=gpu[003,007]"]
    assert shlex.split(s["drain"])[2] == "nodename=gpu[003,007]"
    assert doc["hostfile"] == [f"{h} slots=8" for h in doc["keep"]]
    k = doc["kubernetes"]
    assert k["cordon"] == ["kubectl cordon gpu003", "kubectl cordon gpu007"]
    assert k["taint"][0] == "kubectl taint nodes gpu003 validator.io/excluded=true:NoSchedule"
    assert "operator: NotIn" in k["affinity"] and "- 'gpu007'" in k["affinity"]
    assert lines(doc)[0] == "exclude: gpu[003,007] (2 of 8)"
    assert exclusion(base, [], {})["slurm"]["srun"] == "" and lines(exclusion(base, [], {})) == []


def test_hostile_names_are_quoted_in_every_command() -> None:
    evil = "n1;rm -rf ~"
    doc = exclusion(["n0", evil, "n2"], [evil], {}, pods=True)
    assert shlex.split(doc["kubernetes"]["cordon"][0])[:2] == ["kubectl", "cordon"]
    assert "'n1;rm -rf ~'" in doc["kubernetes"]["cordon"][0]
    assert doc["slurm"]["drain"] == "" and doc["hostfile"] == [], "pods are no Slurm nodes"
    hosts = exclusion(["n0", evil, "n2"], [evil], {})
    assert shlex.split(hosts["slurm"]["drain"])[2] == f"nodename={evil}"


def test_every_format_carries_the_exclusion_and_the_probe_figures() -> None:
    base = ["h1", "h2", "h3", "h4"]
    finding = Finding("PRB001", Severity.WARNING, "Slow node: compute", "h3: slower", hosts=["h3"])
    probes = {"nodes": [{"host": h, "hardware": "cpu", "compute": {"cpu python": 0.05 if h != "h3" else 0.002},
                         "memory": {}, "named": ["compute"] if h == "h3" else [],
                         "against": {"compute": ["peers"]} if h == "h3" else {}} for h in base],
              "stats": [{"kind": "compute", "key": "cpu python", "hardware": "cpu", "unit": "GFLOP/s", "nodes": 4, "median": 0.05,
                         "mad": 0.001, "suspects": ["h3"], "named": ["h3"]}],
              "baseline": [], "no_baseline": [], "rounds": 7, "failed": [],
              "line": "probes: 4 nodes, 7 rounds; slow: h3"}  # fmt: skip
    scan = {"transport": "ssh", "targets": 4, "reached": 4, "interrupted": False, "elapsed_s": 1.0, "net_check": None,
            "probes": probes, "exclude": exclusion(base, ["h3"], {}), "warnings": [], "failed": None}  # fmt: skip
    report = Report([finding], 4, base, scan=scan, drain=[])  # type: ignore[arg-type]
    doc = json.loads(render(report, "json", RenderOptions()))
    assert doc["scan"]["exclude"]["slurm"]["exclude"] == "--exclude=h3" and doc["scan"]["probes"]["rounds"] == 7
    page = render(report, "html", RenderOptions())
    assert "--exclude=h3" in page and "kubectl cordon h3" in page and "<h2>Probes</h2>" in page
    assert "probes: 4 nodes, 7 rounds; slow: h3" in render(report, "table", RenderOptions())


def test_the_schema_documents_the_new_sections() -> None:
    schema = json.loads((Path(__file__).resolve().parents[2] / "docs/schema/report-v1.schema.json").read_text())
    text = json.dumps(schema)
    assert "ExcludeDoc" in text and "ProbesDoc" in text


def test_a_slow_node_is_judged_against_its_peers_without_itself() -> None:
    """Among 4 nodes the slow one's own distance is one of the 4 deviations: with it, the MAD (0.4)
    lifts the gap to 2.97, past the node's own 1.9; against the 3 others (median 3.0, MAD 0.2) it is
    named. The healthy ones, each against the other 3, are not."""
    figures = {"a": 1.0, "b": 2.8, "c": 3.0, "d": 3.6}
    med, mad = judge.spread(list(figures.values()))
    assert not judge.below(1.0, med, mad, "cpu python")  # the old, inclusive test missed it
    assert judge.suspects(figures, "cpu python")[2] == {"a"}
    for n in (3, 5, 8):  # odd and even counts: the cheap first test never drops a real suspect
        peers = {f"h{i}": 3.0 + 0.1 * i for i in range(n - 1)}
        assert judge.suspects({**peers, "slow": 1.0}, "cpu python")[2] == {"slow"}
        assert judge.suspects(peers | {"ok": 3.05}, "cpu python")[2] == set()


def gone(pid: int, within: float = 10.0) -> bool:
    """Whether process ``pid`` ended (or is a zombie nobody reaped) within ``within`` seconds."""
    import os
    import time

    until = time.monotonic() + within
    while time.monotonic() < until:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return not os.path.exists(f"/proc/{pid}")


def test_the_preflights_probe_child_stays_warm_across_rounds_and_a_silent_one_is_replaced() -> None:
    """The preflight's probes run in one child for all rounds (torch imported once): the same pid
    answers each round; a child that does not answer in time is killed and the next round starts
    a fresh one."""
    from validator.probes import local

    first = local.run("compute")
    assert isinstance(first, dict) and first["probe"] == "compute", first
    assert local._child is not None
    pid = local._child[0].pid
    again = local.run("memory")
    assert isinstance(again, dict) and again["probe"] == "memory" and local._child[0].pid == pid
    assert local.run("compute", timeout=0.001) == "no answer within 0.001 s"
    assert local._child is None and gone(pid)
    fresh = local.run("memory")
    assert isinstance(fresh, dict) and local._child is not None and local._child[0].pid != pid
    assert local.run("gpu") == "no 'gpu' probe"
    local._stop()


def test_the_probe_child_ends_when_its_rank_execs_the_job() -> None:
    """A participant execs the job after the verdict: the child's stdin closes with the exec, and it
    ends rather than outlive the preflight beside the job."""
    script = (
        "import os, sys\nfrom validator.probes import local\nassert isinstance(local.run('memory'), dict)\n"
        "print(local._child[0].pid, flush=True)\nos.execvp('sleep', ['sleep', '5'])\n"
    )
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        pid = int(p.stdout.readline())
        assert gone(pid), f"the probe child {pid} outlived the exec"
        assert p.poll() is None  # the job (sleep) still runs
    finally:
        p.kill()
        p.wait()
