"""Baselines per hardware type: the profile's ``baselines`` (validated, one-line errors naming the
file, line and key), the text edit that writes them into a profile and keeps the rest, and the
judgement that holds a node to the baseline of its hardware as well as to its peers."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import VALIDATOR
from validator import baseline
from validator.errors import UserError
from validator.probes import judge, rounds
from validator.profiles import BASELINE_KINDS, BaselineFigure, load_profile

GOOD = """\
# a profile with comments, kept as written
name: lab  # trailing comment
nodes: 2

baselines:
  "NVIDIA H100 80GB HBM3":
    compute:
      "cuda:0 torch-cuda-fp16": {median: 980000.5, mad: 1200, n: 16, date: 2026-12-01}
    memory:
      "host copy": {median: 12.5}
  "Intel(R) Xeon(R) Platinum 8480+":
    compute:
      "cpu python": {median: 1e-02, mad: 0.0005}

# this comment leads the next key
env:
  NCCL_DEBUG: WARN
"""


def write(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_a_profile_with_baselines_validates(tmp_path: Path) -> None:
    p = load_profile(write(tmp_path, GOOD))
    h100 = p.baselines["NVIDIA H100 80GB HBM3"]
    assert h100["compute"]["cuda:0 torch-cuda-fp16"] == BaselineFigure(980000.5, 1200.0, 16, "2026-12-01")
    assert h100["memory"]["host copy"] == BaselineFigure(12.5)
    assert p.baselines["Intel(R) Xeon(R) Platinum 8480+"]["compute"]["cpu python"].median == 0.01
    assert p.env == {"NCCL_DEBUG": "WARN"} and "baselines.NVIDIA H100 80GB HBM3" in p.pinned()
    assert BASELINE_KINDS == rounds.KINDS


FIG = 'baselines:\n  "H100":\n    compute:\n      "cuda:0 e": {%s}\n'
KEY = "baselines['H100'].compute['cuda:0 e']"


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (FIG % "median: fast", 4, f"{KEY}.median must be a positive number, got 'fast'"),
        (FIG % "median: 0", 4, f"{KEY}.median must be a positive number, got '0'"),
        (FIG % "median: .nan", 4, f"{KEY}.median must be a positive number"),
        (FIG % "median: 1, mad: -1", 4, f"{KEY}.mad must be a number >= 0, got '-1'"),
        (FIG % "median: 1, n: 2.5", 4, f"{KEY}.n must be a node count from 0 to 131,072, got '2.5'"),
        (FIG % "median: 1, date: yesterday", 4, f"{KEY}.date must be a date YYYY-MM-DD, got 'yesterday'"),
        (FIG % "median: 1, medain: 2", 4, f"unknown key 'medain' in {KEY} (did you mean 'median'?)"),
        (FIG % "mad: 1", 4, f"{KEY} has no median"),
        (FIG % "median: [1]", 4, f"{KEY}.median must be a positive number"),
        (
            'baselines:\n  "H100":\n    disk: {}\n',
            3,
            "baselines['H100']: unknown probe 'disk' (known: compute, memory)",
        ),
        ('baselines:\n  "H100":\n    compute: 3\n', 3, "baselines['H100'].compute must be a mapping"),
        ("baselines: [a]\n", 1, "baselines must be a mapping"),
        ('baselines:\n  "": {}\n', 2, "baselines keys must be plain, non-empty names"),
        ("baselines:\n  a: {}\n  a: {}\n", 3, "duplicate key 'a' in baselines"),
    ],
)
def test_a_malformed_baseline_names_file_line_and_key(tmp_path: Path, text: str, line: int, message: str) -> None:
    p = write(tmp_path, text)
    with pytest.raises(UserError) as e:
        load_profile(p)
    assert e.value.where == f"{p}:{line}"
    assert message in e.value.message


@pytest.mark.parametrize("command", [["scan", "--local", "--probes"], ["baseline", "record", "--local"]])
def test_a_malformed_baseline_is_one_line_and_exit_2_before_anything_runs(tmp_path: Path, command: list[str]) -> None:
    p = write(tmp_path, FIG % "median: -3")
    run = subprocess.run([*VALIDATOR, *command, "--profile", str(p)], capture_output=True, text=True, timeout=60,
                         check=False)  # fmt: skip
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr == f"validator: error: {p}:4: {KEY}.median must be a positive number, got '-3'\n"
    assert p.read_text() == FIG % "median: -3"  # untouched


def test_record_needs_a_profile_or_an_output() -> None:
    run = subprocess.run([*VALIDATOR, "baseline", "record", "--local"], capture_output=True, text=True, timeout=60,
                         check=False)  # fmt: skip
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "--profile FILE" in run.stderr


def test_written_baselines_replace_the_block_and_keep_the_rest_as_written(tmp_path: Path) -> None:
    old = load_profile(write(tmp_path, GOOD)).baselines
    new = {"NVIDIA H100 80GB HBM3": {"compute": {"cuda:0 torch-cuda-fp16": BaselineFigure(612.25, 3.5, 8, "2026-12-02")}},
           "AMD EPYC 9654 \"Genoa\"\u00e9\U0001f600": {"memory": {"host copy": BaselineFigure(1e-05, 0.0, 4, "2026-12-02")}}}  # fmt: skip
    text = baseline.with_block(GOOD, baseline.block(baseline.merged(old, new)))
    out = write(tmp_path, text, "out.yaml")
    p = load_profile(out)
    assert p.baselines["NVIDIA H100 80GB HBM3"]["compute"]["cuda:0 torch-cuda-fp16"] == BaselineFigure(
        612.25, 3.5, 8, "2026-12-02"
    )
    assert p.baselines["NVIDIA H100 80GB HBM3"]["memory"]["host copy"] == BaselineFigure(12.5)  # not measured: kept
    assert p.baselines['AMD EPYC 9654 "Genoa"\u00e9\U0001f600']["memory"]["host copy"].median == 1e-05
    assert p.baselines["Intel(R) Xeon(R) Platinum 8480+"]["compute"]["cpu python"].median == 0.01
    before, after = GOOD.split("baselines:")[0], GOOD.split("# this comment leads")[1]
    assert text.startswith(before) and text.endswith("# this comment leads" + after)
    assert p.env == {"NCCL_DEBUG": "WARN"} and p.nodes == 2
    again = baseline.with_block(text, baseline.block(p.baselines))
    assert again == text  # writing the same figures again changes nothing


@pytest.mark.parametrize(
    "text",
    ["", "name: x\n", "name: x", "name: x\nbaselines: {}\n", "baselines: {}  # flow\nname: x\n", "# only a comment\n"],
)
def test_the_block_goes_in_wherever_the_profile_has_none_or_an_empty_one(tmp_path: Path, text: str) -> None:
    fig = {"cpu model": {"compute": {"cpu python": BaselineFigure(0.02, 0.001, 3, "2026-12-02")}}}
    out = baseline.with_block(text, baseline.block(fig))
    p = load_profile(write(tmp_path, out))
    assert p.baselines == fig
    assert ("name: x" in out) == ("name: x" in text) and out.count("baselines:") == 1


def test_the_baseline_is_the_median_and_mad_of_the_nodes_not_named() -> None:
    rows = [{"host": f"h{i}", "hardware": "cpu model", "compute": {"cpu python": v}, "memory": {"host copy": 10.0},
             "named": [], "against": {}} for i, v in enumerate([0.020, 0.021, 0.022, 0.030])]  # fmt: skip
    rows.append({"host": "slow", "hardware": "cpu model", "compute": {"cpu python": 0.001}, "memory": {},
                 "named": ["compute"], "against": {"compute": ["peers"]}})  # fmt: skip
    rows.append({"host": "gone", "hardware": "", "compute": {}, "memory": {}, "named": [], "against": {}})
    doc = {"nodes": rows, "stats": [], "baseline": [], "no_baseline": [], "rounds": 3, "failed": ["gone"], "line": ""}
    got, left = baseline.measured(doc, "2026-12-02")  # type: ignore[arg-type]
    assert left == ["slow", "gone"]
    assert got == {"cpu model": {"compute": {"cpu python": BaselineFigure(0.0215, 0.001, 4, "2026-12-02")},
                                 "memory": {"host copy": BaselineFigure(10.0, 0.0, 4, "2026-12-02")}}}  # fmt: skip


def test_a_node_under_its_baseline_by_the_factor_and_the_gap_is_below_it() -> None:
    assert judge.below(600.0, 980.0, 10.0, "cuda:0 torch-cuda-fp16") is False  # 1.63x, but under the 20 TFLOP/s floor
    assert judge.below(600_000.0, 980_000.0, 10_000.0, "cuda:0 torch-cuda-fp16")
    assert not judge.below(700_000.0, 980_000.0, 10_000.0, "cuda:0 torch-cuda-fp16")  # within 1.5x
    assert not judge.below(0.5, 1.0, 0.2, "host copy")  # within five of the baseline's spreads


def answers(values: dict[str, float], cpu: str = "cpu model") -> rounds.Answers:
    return {h: {"probe": "compute", "cpu": cpu, "devices": [{"device": "cpu", "engine": "python", "gflops": v}]}
            for h, v in values.items()}  # fmt: skip


def judged(first: dict[str, float], alone: dict[str, float], base: float | None) -> rounds.Probed:
    """The rounds over answers given as data (the nodes' real probes: tests/integration/test_baseline_nodes.py)."""
    calls: list[list[str]] = []

    async def probe_round(kind: rounds.Kind, nodes: list[str]) -> rounds.Answers:
        calls.append(nodes)
        return answers({h: (first if len(calls) == 1 else alone)[h] for h in nodes})

    figs = {"cpu model": {"compute": {"cpu python": BaselineFigure(base, 0.0005, 8, "2026-12-02")}}} if base else None
    return asyncio.run(rounds.run(list(first), probe_round, ("compute",), figs))


def test_with_fewer_than_three_nodes_the_baseline_alone_names_a_node() -> None:
    out = judged({"a": 0.040, "b": 0.010}, {"a": 0.041, "b": 0.011}, base=0.040)
    assert [(f.code, f.hosts) for f in out.findings] == [("PRB001", ["b"])]
    f = out.findings[0]
    assert f.message.startswith("b: below the baseline for cpu model in compute, 3 rounds (all nodes, then again 2 "
                                "times beside 1 control nodes): cpu python: 0.01 vs 0.04 GFLOP/s (the baseline")  # fmt: skip
    assert f.expected == "within 1.5x of the baseline for cpu model" and f.actual == "cpu python: 0.01 GFLOP/s"
    b = next(r for r in out.doc["nodes"] if r["host"] == "b")
    assert b["hardware"] == "cpu model" and b["against"] == {"compute": ["baseline"]}
    assert out.doc["baseline"][0]["below"] == ["b"] and out.doc["baseline"][0]["named"] == ["b"]
    assert out.doc["line"].endswith("against the baseline for cpu model; slow: b")
    assert judged({"a": 0.040, "b": 0.010}, {"a": 0.041, "b": 0.011}, base=None).findings == []  # peers alone: too few


def test_a_node_is_named_against_both_when_both_say_so_and_not_when_alone_it_keeps_up() -> None:
    first = {"a": 0.040, "b": 0.041, "c": 0.039, "d": 0.010}
    out = judged(first, {**first, "d": 0.012}, base=0.040)
    assert [f.hosts for f in out.findings] == [["d"]]
    assert "below the baseline for cpu model and slower than its peers" in out.findings[0].message
    assert out.doc["nodes"][3]["against"] == {"compute": ["baseline", "peers"]}
    assert judged(first, {**first, "d": 0.039}, base=0.040).findings == []  # not confirmed alone


def test_a_baseline_most_nodes_miss_names_none_and_says_so_once() -> None:
    first = {"a": 0.010, "b": 0.011, "c": 0.010}
    out = judged(first, first, base=0.040)
    assert [(f.code, f.hosts) for f in out.findings] == [("PRB004", ["a", "b", "c"])]
    assert out.findings[0].message == (
        "3 of 3 nodes of cpu model below the baseline in compute, in the first round: cpu python: median 0.01 vs "
        "0.04 GFLOP/s (the baseline: MAD 0.0005, n=8, 2026-12-02); none is named or taken out: the baseline is "
        "stale or every node changed"
    )
    assert out.doc["rounds"] == 1  # not measured again
    assert all(r["named"] == [] for r in out.doc["nodes"])
    row = out.doc["baseline"][0]
    assert row["below"] == ["a", "b", "c"] and row["named"] == [] and row["most_below"] is True
    assert "slow:" not in out.doc["line"]
    # two of two (the VM whose memory bandwidth halved between the record and the scan)
    assert [f.code for f in judged({"a": 0.010, "b": 0.011}, {"a": 0.010, "b": 0.011}, base=0.040).findings] == [
        "PRB004"
    ]


@pytest.mark.parametrize(("first", "named"), [
    ({"a": 0.040, "b": 0.010}, ["b"]),  # one of two: half is not most
    ({"a": 0.040, "b": 0.041, "c": 0.039, "d": 0.010, "e": 0.011}, ["d", "e"]),  # two of five
])  # fmt: skip
def test_a_baseline_half_the_nodes_or_fewer_miss_still_names_them(first: dict[str, float], named: list[str]) -> None:
    out = judged(first, first, base=0.040)
    assert sorted(h for f in out.findings if f.code in ("PRB001", "PRB002") for h in f.hosts) == named
    assert all(f.code != "PRB004" for f in out.findings) and out.doc["baseline"][0]["most_below"] is False


def test_most_below_is_judged_per_hardware_type() -> None:
    async def probe_round(kind: rounds.Kind, nodes: list[str]) -> rounds.Answers:
        return {**answers({h: 0.010 for h in nodes if h in "ab"}, cpu="old"),
                **answers({h: {"c": 0.040, "d": 0.040, "e": 0.010}[h] for h in nodes if h in "cde"}, cpu="new")}  # fmt: skip

    figs = {hw: {"compute": {"cpu python": BaselineFigure(0.040, 0.0005, 4)}} for hw in ("old", "new")}
    out = asyncio.run(rounds.run(list("abcde"), probe_round, ("compute",), figs))
    assert sorted((f.code, tuple(f.hosts)) for f in out.findings) == [("PRB001", ("e",)), ("PRB004", ("a", "b"))]
    assert out.doc["baseline"][0]["hardware"] == "new"


def test_peers_are_the_nodes_of_one_hardware_type() -> None:
    """A partition of three older and three newer CPU nodes: the older are not slow against the newer's
    median; a slow node among the newer is judged by the newer alone, beside controls of its type."""
    speed = {"a": 0.010, "b": 0.011, "c": 0.010, "d": 0.040, "e": 0.041, "f": 0.040}

    def probe_round(slow: dict[str, float]) -> rounds.Round:
        async def answer(kind: rounds.Kind, nodes: list[str]) -> rounds.Answers:
            values = {**speed, **slow}
            return {**answers({h: values[h] for h in nodes if h in "abc"}, cpu="old"),
                    **answers({h: values[h] for h in nodes if h not in "abc"}, cpu="new")}  # fmt: skip

        return answer

    out = asyncio.run(rounds.run(list(speed), probe_round({}), ("compute",)))
    assert out.findings == [] and out.doc["rounds"] == 1
    assert [(s["hardware"], s["median"], s["nodes"]) for s in out.doc["stats"]] == [("new", 0.04, 3), ("old", 0.01, 3)]
    assert "new: compute cpu python median 0.04 GFLOP/s, old: compute cpu python median 0.01" in out.doc["line"]
    slow = asyncio.run(rounds.run([*speed, "g"], probe_round({"g": 0.012}), ("compute",)))
    assert [(f.code, f.hosts) for f in slow.findings] == [("PRB001", ["g"])]
    assert "against the peers' median 0.04 (MAD 0.0005, 4 nodes)" in slow.findings[0].message
    assert "beside 2 control nodes" in slow.findings[0].message


def test_a_node_whose_hardware_has_no_baseline_is_judged_by_its_peers_and_said() -> None:
    async def probe_round(kind: rounds.Kind, nodes: list[str]) -> rounds.Answers:
        return answers(dict.fromkeys(nodes, 0.04), cpu="other model")

    figs = {"cpu model": {"compute": {"cpu python": BaselineFigure(0.040)}}}
    out = asyncio.run(rounds.run(["a", "b", "c"], probe_round, ("compute",), figs))
    assert out.findings == [] and out.doc["baseline"] == [] and out.doc["no_baseline"] == ["other model"]
    assert "no baseline for other model" in out.doc["line"]


def test_the_hardware_is_the_gpu_model_else_the_cpu_model_from_the_answer() -> None:
    gpu = {"cpu": "x86", "devices": [{"device": "cuda:0", "engine": "torch-cuda-fp16", "name": "NVIDIA H200"}]}
    assert rounds.hardware_of(gpu) == "NVIDIA H200"
    assert rounds.hardware_of({"cpu": " Xeon " + "x" * 500, "devices": []}) == ("Xeon " + "x" * 500)[:100]
    assert rounds.hardware_of({"cpu": 3, "devices": "junk"}) == "" and rounds.hardware_of("timeout") == ""


def test_the_reports_say_what_named_the_node_and_show_the_baseline() -> None:
    from validator.model import Report
    from validator.probes.exclude import exclusion
    from validator.report import RenderOptions, render

    out = judged({"a": 0.040, "b": 0.010}, {"a": 0.041, "b": 0.011}, base=0.040)
    scan = {"transport": "ssh", "targets": 2, "reached": 2, "interrupted": False, "elapsed_s": 1.0, "net_check": None,
            "probes": out.doc, "exclude": exclusion(["a", "b"], ["b"], {}), "warnings": [], "failed": None}  # fmt: skip
    report = Report(out.findings, 2, ["a", "b"], scan=scan, drain=[])  # type: ignore[arg-type]
    page = render(report, "html", RenderOptions())
    assert "compute (baseline)" in page and "cpu model: compute cpu python median 0.04 GFLOP/s" in page
    doc = json.loads(render(report, "json", RenderOptions()))  # checked against docs/schema (VALIDATOR_SELF_CHECK)
    assert doc["scan"]["probes"]["nodes"][1]["against"] == {"compute": ["baseline"]}
    assert "against the baseline for cpu model; slow: b" in render(report, "table", RenderOptions())


def test_record_on_this_machine_writes_output_and_leaves_the_profile_as_it_was(tmp_path: Path) -> None:
    """Real probe processes through the local transport (the scan's): the baseline of this machine."""
    src, out = write(tmp_path, "# lab\nname: lab\n"), tmp_path / "out.yaml"
    run = subprocess.run([*VALIDATOR, "baseline", "record", "--local", "--profile", str(src), "--output", str(out)],
                         capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert src.read_text() == "# lab\nname: lab\n" and out.read_text().startswith("# lab\nname: lab\n\nbaselines:")
    p = load_profile(out)
    [(hardware, kinds)] = p.baselines.items()
    assert hardware in run.stdout and {k: set(v) for k, v in kinds.items()} == {
        "compute": {"cpu python"},
        "memory": {"host copy"},
    }


H200 = Path(__file__).resolve().parents[1] / "fixtures" / "gpu" / "h200"  # a real H200: gpu-capture/probes.sh


def test_real_h200_answers_are_read_held_to_their_own_baseline_and_a_halved_gpu_is_named() -> None:
    """The compute and memory probes' answers on a real H200 (torch 2.11 CUDA), and the baseline
    `validator baseline record --local` wrote there. Their keys meet; four nodes that each gave one
    of the GPU's own five samples (568-609 TFLOP/s: its real spread) pass, against the peers and
    the baseline; one at half of that (a power brake, a GPU at a low clock) is named on both."""
    compute = json.loads((H200 / "probe-compute.json").read_text())
    memory = json.loads((H200 / "probe-memory.json").read_text())
    got = rounds.figures("compute", compute)
    assert got == {"cuda:0 torch-cuda-fp16": 594924.1233}
    assert set(rounds.figures("memory", memory)) == {"host copy", "cuda:0 device-copy", "cuda:0 host-to-device"}
    assert rounds.hardware_of(compute) == rounds.hardware_of(memory) == "NVIDIA H200"
    base = load_profile(H200 / "baseline.yaml").baselines
    assert set(base["NVIDIA H200"]["compute"]) == set(got)
    assert set(base["NVIDIA H200"]["memory"]) == set(rounds.figures("memory", memory))
    samples = compute["devices"][0]["samples"]

    def run(rates: dict[str, float]) -> rounds.Probed:
        async def probe_round(kind: rounds.Kind, nodes: list[str]) -> rounds.Answers:
            return {h: {**compute, "devices": [{**compute["devices"][0], "gflops": rates[h]}]} for h in nodes}

        return asyncio.run(rounds.run(list(rates), probe_round, ("compute",), base))

    healthy = {f"gpu{i}": samples[i] for i in range(4)}
    assert run(healthy).findings == []
    out = run({**healthy, "gpu3": samples[3] / 2})
    assert [(f.code, f.hosts) for f in out.findings] == [("PRB001", ["gpu3"])]
    assert "below the baseline for NVIDIA H200 and slower than its peers" in out.findings[0].message
