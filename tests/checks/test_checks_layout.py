"""LAY: the parallel layout against the world size and the frameworks' own rules, from factory facts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.factories import check, fires, node_job, only, rank_job, tweak
from validator.agent.probe import job_configs
from validator.errors import UserError
from validator.facts.layout import parse_explicit, parse_layout
from validator.model import Facts, LayoutFacts, Severity


def megatron(**degrees: int) -> LayoutFacts:
    sizes = {
        k: degrees.pop(k)
        for k in ("layers", "global_batch", "micro_batch", "layers_per_vstage", "uneven")
        if k in degrees
    }
    return {"framework": "megatron", "source": "argv", "degrees": dict(degrees), "sizes": sizes,
            "order": "tp-cp-ep-dp-pp", "errors": []}  # fmt: skip


def laid(job: list[Facts], layout: Any) -> list[Facts]:
    for i in range(len(job)):
        job = tweak(job, i, launch={"layout": layout})
    return job


def test_healthy_megatron_layout_is_silent() -> None:
    job = laid(rank_job(2, 8), megatron(tp=8, pp=2, layers=32, global_batch=64, micro_batch=2))
    for code in ("LAY001", "LAY002", "LAY003", "LAY004", "LAY005", "LAY006", "LAY007", "LAY008"):
        assert check(job, code) == [], code


def test_no_layout_is_silent() -> None:
    assert [c for c in ("LAY001", "LAY002", "LAY007") if check(rank_job(2, 4), c)] == []


@fires("LAY001")
def test_one_rank_with_another_layout_is_named() -> None:
    job = laid(rank_job(2, 4), megatron(tp=4, pp=2))
    job = tweak(job, 5, launch={"layout": {"degrees": {"tp": 2}}})
    f = only(check(job, "LAY001"))
    assert f.ranks == [5] and f.hosts == ["node002"]
    assert "tp=4" in (f.expected or "") and "tp=2" in (f.actual or "")


@fires("LAY002")
def test_megatron_world_not_divisible() -> None:
    f = only(check(laid(rank_job(2, 4), megatron(tp=4, pp=3)), "LAY002"))
    assert "world 8 % (tp 4 x pp 3 x cp 1 = 12) = 8" in f.message


def test_megatron_expert_product_not_dividing() -> None:
    f = only(check(laid(rank_job(2, 4), megatron(tp=1, pp=2, ep=3)), "LAY002"))
    assert "etp 1 x ep 3 x pp 2 = 6" in f.message


def test_torchtitan_inferred_dp_shard_and_exact_product() -> None:
    ok = {"framework": "torchtitan", "source": "x.toml", "degrees": {"dp_shard": -1, "tp": 4}, "sizes": {},
          "order": "tp-cp-dp-pp", "errors": []}  # fmt: skip
    assert check(laid(rank_job(2, 4), ok), "LAY002") == []
    bad = {**ok, "degrees": {"dp_shard": 3, "tp": 2}}
    assert "!= world 8" in only(check(laid(rank_job(2, 4), bad), "LAY002")).message
    zero = {**ok, "degrees": {"dp_shard": -1, "tp": 16}}
    assert "= 0, not >= 1" in only(check(laid(rank_job(2, 4), zero), "LAY002")).message


@fires("LAY003")
def test_megatron_layers_not_divisible_by_pp() -> None:
    f = only(check(laid(rank_job(2, 4), megatron(tp=2, pp=4, layers=30)), "LAY003"))
    assert "layers 30 % pp 4 = 2" in f.message
    assert check(laid(rank_job(2, 4), megatron(tp=2, pp=4, layers=30, uneven=1)), "LAY003") == []


def test_megatron_virtual_stages() -> None:
    f = only(check(laid(rank_job(2, 4), megatron(pp=4, layers=32, layers_per_vstage=3)), "LAY003"))
    assert "layers per stage 8 % layers per virtual stage 3 = 2" in f.message
    assert check(laid(rank_job(2, 4), megatron(pp=4, layers=32, layers_per_vstage=2)), "LAY003") == []


@fires("LAY004")
def test_global_batch_not_divisible_by_micro_times_dp() -> None:
    # 8 ranks, tp 2: dp 4; 4 x micro 2 = 8 does not divide 20
    f = only(check(laid(rank_job(2, 4), megatron(tp=2, global_batch=20, micro_batch=2)), "LAY004"))
    assert "global batch 20 % (micro batch 2 x dp 4 = 8) = 4" in f.message
    assert check(laid(rank_job(2, 4), megatron(tp=2, global_batch=24, micro_batch=2)), "LAY004") == []


def test_deepspeed_batch_after_its_filling_in() -> None:
    ds = {"framework": "deepspeed", "source": "--deepspeed_config ds.json", "degrees": {}, "order": "tp-cp-ep-dp-pp",
          "errors": [], "sizes": {"train_batch": 24, "micro_batch": 3}}  # fmt: skip
    # 8 ranks: grad_acc = 24 // 3 // 8 = 1, and 3 x 1 x 8 == 24
    assert check(laid(rank_job(2, 4), ds), "LAY004") == []
    # 16 ranks: grad_acc = 24 // 3 // 16 = 0: DeepSpeed's assertion fails
    assert "train_batch_size 24" in only(check(laid(rank_job(2, 8), ds), "LAY004")).message
    given = {**ds, "sizes": {"train_batch": 32, "micro_batch": 3, "grad_acc": 1}}
    assert "32 != micro 3 x grad_acc 1 x dp 8 = 24" in only(check(laid(rank_job(2, 4), given), "LAY004")).message


@fires("LAY005")
def test_degree_below_one() -> None:
    f = only(check(laid(rank_job(1, 4), megatron(tp=0)), "LAY005"))
    assert "tp=0 is not >= 1" in f.message
    assert check(laid(rank_job(1, 4), megatron(tp=0)), "LAY002") == []  # one finding, not a division by zero


@fires("LAY006")
def test_unreadable_configuration_named_with_its_node() -> None:
    lay = megatron(tp=2) | {"errors": ["--deepspeed_config ds.json: No such file or directory"]}
    f = only(check(tweak(laid(rank_job(2, 2), megatron(tp=2)), 3, launch={"layout": lay}), "LAY006"))
    assert "No such file" in f.message and f.hosts == ["node002"]
    assert f.severity == Severity.WARNING


@fires("LAY007")
def test_tp_larger_than_a_node_spans_nodes() -> None:
    f = only(check(laid(rank_job(2, 4), megatron(tp=8)), "LAY007"))
    assert f.severity == Severity.WARNING
    assert "ranks 0-7 on node[001-002]" in f.message
    assert check(laid(rank_job(2, 4), megatron(tp=8)), "LAY008") == []


def test_tp_spans_nodes_seen_from_node_wrappers() -> None:
    """One torchrun wrapper a node: ranks placed by node rank x processes per node."""
    f = only(check(laid(node_job(2, 4), megatron(tp=8)), "LAY007"))
    assert f.hosts is not None and len(f.hosts) == 2


@fires("LAY008")
def test_node_size_not_a_multiple_of_tp() -> None:
    # 3 nodes x 4 processes, tp 3: ranks 3-5 and 6-8 straddle nodes
    f = only(check(laid(rank_job(3, 4), megatron(tp=3)), "LAY008"))
    assert "ranks 3-5" in f.message and "ranks 6-8" in f.message
    assert check(laid(rank_job(3, 4), megatron(tp=3)), "LAY007") == []
    assert check(laid(rank_job(3, 4), megatron(tp=2)), "LAY008") == []


def test_explicit_layout_words() -> None:
    lay = parse_explicit("tp=2,pp=4,dp=1,order=tp-cp-ep-dp-pp", "--layout")
    assert lay["degrees"] == {"tp": 2, "pp": 4, "dp": 1} and lay["errors"] == []
    assert check(laid(rank_job(2, 4), lay), "LAY002") == []  # 2 x 4 x 1 x 1 == 8
    small = parse_explicit("tp=2,pp=2,dp=1", "--layout")
    assert "tp x pp x cp x dp = 4 != world 8" in only(check(laid(rank_job(2, 4), small), "LAY002")).message
    assert parse_explicit("tp=two", "--layout")["errors"] == ["--layout: tp 'two' is not a whole number"]
    assert "is not one of" in parse_explicit("zz=1", "--layout")["errors"][0]


def test_report_carries_the_group_map() -> None:
    """The JSON report's layout section and the table's lines: TP 8 over nodes of 4 spans them."""
    from validator import pipeline
    from validator.report import RenderOptions, render

    report = pipeline.check(laid(rank_job(2, 4), megatron(tp=8)))
    doc = report.document()["layout"]
    assert doc["degrees"] == {"tp": 8, "cp": 1, "pp": 1, "dp": 1, "ep": 1, "etp": 8, "edp": 1}
    assert doc["groups"] == {"tp": {"size": 8, "count": 1, "spanning": 1, "shown": ["ranks 0-7 on node[001-002]"]}}
    table = render(report, "table", RenderOptions())
    assert "layout: megatron (argv), 8 ranks: tp=8 cp=1 pp=1 dp=1 ep=1" in table
    assert "tp: 1 groups of 8, 1 on several hosts: ranks 0-7 on node[001-002]" in table
    json_doc = json.loads(render(report, "json", RenderOptions()))
    assert json_doc["layout"]["groups"]["tp"]["spanning"] == 1


def test_report_group_map_megatron_order_over_nodes() -> None:
    report = pipeline_report(laid(rank_job(4, 4), megatron(tp=2, pp=2)))
    groups = report["groups"]
    assert groups["tp"]["count"] == 8 and groups["tp"]["spanning"] == 0
    assert groups["pp"]["shown"][0] == "ranks 0,8 on node[001,003]"  # pp outermost: ranks 0 and world/2
    assert groups["dp"]["size"] == 4 and groups["dp"]["spanning"] == 4


def pipeline_report(job: list[Facts]) -> Any:
    from validator import pipeline

    return pipeline.check(job).document()["layout"]


def test_no_layout_no_section() -> None:
    from validator import pipeline

    assert "layout" not in pipeline.check(rank_job(1, 2)).document()


def test_profile_makes_spanning_an_error(tmp_path: Any) -> None:
    from validator.profiles import load_profile

    path = tmp_path / "tp-in-node.yaml"
    path.write_text("layout_spanning: error\n")
    job = laid(rank_job(2, 4), megatron(tp=8))
    assert only(check(job, "LAY007", load_profile(str(path)))).severity == Severity.ERROR
    path.write_text("layout_spanning: sometimes\n")
    with pytest.raises(UserError, match="layout_spanning"):
        load_profile(str(path))


def test_a_rank_whose_command_names_no_layout_differs() -> None:
    job = tweak(laid(rank_job(1, 4), megatron(tp=2)), 2, launch={"layout": None})
    f = only(check(job, "LAY001"))
    assert f.ranks == [2] and f.actual == "no layout"


FIXTURES = Path(__file__).parent.parent / "fixtures" / "layout"


def from_fixture(argv: list[str]) -> LayoutFacts:
    """The layout the agent's reader and the controller's parser make of a real configuration."""
    lay = parse_layout(argv, job_configs(argv, {"HF_HOME": "/nonexistent"}), {})
    assert lay is not None
    return lay


def test_accelerate_megatron_example_by_megatrons_rule() -> None:
    """accelerate's own Megatron-LM example (TP 2, PP 2, 4 processes) passes where the node's
    accelerate version is not known (an unnamed context parallel size counts as 1); a CP of 2 named on the command line makes Megatron's world %
    (TP x PP x CP) fail on 4 ranks."""
    path = str(FIXTURES / "accelerate_megatron_gpt.yaml")
    lay = from_fixture(["accelerate", "launch", "--config_file", path, "train.py"])
    assert check(laid(rank_job(1, 4), lay), "LAY002") == []
    cp2 = from_fixture(["accelerate", "launch", "--config_file", path, "--megatron_lm_context_parallel_size=2", "t.py"])
    f = only(check(laid(rank_job(1, 4), cp2), "LAY002"))
    assert "world 4 % (tp 2 x pp 2 x cp 2 = 8) = 4" in f.message
    # on accelerate 1.13 or later the plugin's unset CP is 2: the example itself fails Megatron's rule there
    argv = ["accelerate", "launch", "--config_file", path, "train.py"]
    new = parse_layout(argv, job_configs(argv, {"HF_HOME": "/nonexistent"}), {}, "1.14.0")
    f = only(check(laid(rank_job(1, 4), new), "LAY002"))
    assert "cp=2 is accelerate 1.14.0's default" in f.message and "(tp 2 x pp 2 x cp 2 = 8) = 4" in f.message
    assert check(laid(rank_job(1, 8), new), "LAY002") == []


def test_accelerate_parallelism_config_total_size_is_num_processes() -> None:
    lay = from_fixture(["accelerate", "launch", "--config_file", str(FIXTURES / "accelerate_tp_hsdp.yaml"), "t.py"])
    assert check(laid(rank_job(1, 8), lay), "LAY002") == []
    f = only(check(laid(rank_job(2, 8), lay), "LAY002"))
    assert "total_size dp_replicate(2) x dp_shard(2) x cp(1) x tp(2) = 8 != num_processes 16" in f.message
    ddp = {**lay, "degrees": {"dp_replicate": 1, "dp_shard": 1}}  # total 1: accelerate makes it DDP
    assert check(laid(rank_job(2, 8), ddp), "LAY002") == []
    assert "dp_shard=-1 is not >= 1" in only(check(laid(rank_job(1, 8), {**lay, "degrees": {"dp_shard": -1}}),
                                                    "LAY005")).message  # fmt: skip


@fires("LAY002")
def test_accelerate_sequence_parallel_by_deepspeeds_rule() -> None:
    """accelerate skips total_size with SP (DeepSpeed's): DeepSpeed needs world % sp == 0
    (parallel_state_sp.py initialize_sequence_parallel); CP and SP together accelerate refuses."""
    lay = from_fixture(
        ["accelerate", "launch", "--config_file", str(FIXTURES / "accelerate_sp_deepspeed.yaml"), "t.py"]
    )
    assert check(laid(rank_job(1, 2), lay), "LAY002") == []
    assert check(laid(rank_job(2, 4), lay), "LAY002") == []  # 8 ranks, sp 2: dp 4 (no total_size check)
    odd = {**lay, "degrees": {**lay["degrees"], "sp": 3}}
    assert (
        "DeepSpeed sequence parallel: world 8 % sp_size 3 = 2"
        in only(check(laid(rank_job(2, 4), odd), "LAY002")).message
    )
    both = {**lay, "degrees": {**lay["degrees"], "cp": 2}}
    assert (
        "cp_size(2) and sp_size(2) are mutually exclusive" in only(check(laid(rank_job(2, 4), both), "LAY002")).message
    )
    ddp_tp = {**lay, "degrees": {"dp_replicate": 2, "dp_shard": 1, "tp": 4}}
    assert (
        "accelerate refuses TP/CP over pure data parallelism"
        in only(check(laid(rank_job(2, 4), ddp_tp), "LAY002")).message
    )


@fires("LAY002")
def test_accelerate_fsdp1_hybrid_shard_needs_whole_nodes_of_devices() -> None:
    """FSDP1 HYBRID_SHARD shards over dist.new_subgroups(torch.cuda.device_count()): 12 ranks on
    8-GPU nodes raise in torch; 16 do not; nodes without GPUs leave the rule out."""
    path = str(FIXTURES / "accelerate_fsdp.yaml")
    lay = from_fixture(["accelerate", "launch", "--config_file", path, "--fsdp_sharding_strategy=HYBRID_SHARD", "t.py"])
    assert check(laid(rank_job(2, 8, gpus=8), lay), "LAY002") == []
    f = only(check(laid(rank_job(2, 6, gpus=8), lay), "LAY002"))
    assert "torch.cuda.device_count() = 8 ranks: world 12 % 8 = 4" in f.message
    assert "(world < 8)" in only(check(laid(rank_job(1, 4, gpus=8), lay), "LAY002")).message
    assert check(laid(rank_job(2, 6, gpus=0), lay), "LAY002") == []


def test_fsdp1_hybrid_shard_groups_are_the_nodes_devices() -> None:
    """FSDP1 HYBRID_SHARD shards within dist.new_subgroups(torch.cuda.device_count()) (consecutive ranks) and
    replicates across them: on 2 nodes of 8 GPUs the report maps shard groups 0-7 and 8-15, replicate pairs (i, i+8);
    without GPUs in the facts (device count unknown) no such groups are mapped."""
    path = str(FIXTURES / "accelerate_fsdp.yaml")
    lay = from_fixture(["accelerate", "launch", "--config_file", path, "--fsdp_sharding_strategy=HYBRID_SHARD", "t.py"])
    groups = pipeline_report(laid(rank_job(2, 8, gpus=8), lay))["groups"]
    assert groups["dp_shard"]["size"] == 8 and groups["dp_shard"]["count"] == 2 and groups["dp_shard"]["spanning"] == 0
    assert groups["dp_replicate"]["size"] == 2 and groups["dp_replicate"]["count"] == 8
    assert groups["dp_replicate"]["shown"][0] == "ranks 0,8 on node[001-002]"
    assert "dp_shard" not in pipeline_report(laid(rank_job(2, 8, gpus=0), lay))["groups"]


@fires("LAY007")
def test_fsdp1_hybrid_shard_groups_spanning_nodes_warn() -> None:
    """HYBRID_SHARD means to shard within a node; torch shards over torch.cuda.device_count() consecutive ranks, so
    4 processes on each 8-GPU node put every shard group of 8 on two nodes (a warning, as a spanning TP group), and
    8 processes a node keep each group on its node."""
    path = str(FIXTURES / "accelerate_fsdp.yaml")
    lay = from_fixture(["accelerate", "launch", "--config_file", path, "--fsdp_sharding_strategy=HYBRID_SHARD", "t.py"])
    f = only(check(laid(rank_job(4, 4, gpus=8), lay), "LAY007"))
    assert f.message.startswith(
        "2 FSDP HYBRID_SHARD shard (torch.cuda.device_count() consecutive ranks) group(s) larger"
    )
    assert "ranks 0-7 on node[001-002]" in f.message and f.severity == Severity.WARNING
    assert check(laid(rank_job(2, 8, gpus=8), lay), "LAY007") == []
    # every rank in one shard group (world = the devices of one node), nothing to replicate: still on two nodes
    f = only(check(laid(rank_job(2, 4, gpus=8), lay), "LAY007"))
    assert f.message.startswith("1 FSDP HYBRID_SHARD shard") and "ranks 0-7 on node[001-002]" in f.message
    # FSDP2 / torchtitan HSDP shards over the mesh the job asked for: its dp_shard groups may span nodes by design
    titan = parse_explicit("dp_replicate=2,dp_shard=8", "--layout")
    assert check(laid(rank_job(4, 4, gpus=8), titan), "LAY007") == []


def test_accelerate_processes_not_divisible_by_machines() -> None:
    lay = from_fixture(["accelerate", "launch", "--config_file", str(FIXTURES / "accelerate_tp_hsdp.yaml"),
                        "--num_processes", "6", "--num_machines", "4", "t.py"])  # fmt: skip
    job = rank_job(1, 8)
    for i in range(len(job)):
        job = tweak(job, i, launch={"world_size": None})  # the contract did not name it: num_processes does
    msgs = [f.message for f in check(laid(job, lay), "LAY002")]
    assert any("num_processes 6 % num_machines 4 = 2: accelerate starts 1 a machine, 4 in all" in m for m in msgs)


def test_torchtitan_global_batch_rule() -> None:
    """torchtitan/train.py: global_batch_size % (local_batch_size x dp) == 0. llama3 70B's TOML:
    local 8, TP 8, dp_shard -1; on 64 ranks dp is 8, so a global batch must be a multiple of 64."""
    toml = ["torchrun", "-m", "torchtitan.train", "--job.config_file", str(FIXTURES / "torchtitan_llama3_70b.toml")]
    assert check(laid(rank_job(8, 8), from_fixture(toml)), "LAY004") == []  # -1: one accumulation step
    bad = from_fixture([*toml, "--training.global_batch_size", "96"])
    f = only(check(laid(rank_job(8, 8), bad), "LAY004"))
    assert "global_batch_size 96 % (local_batch_size 8 x dp 8 = 64) = 32" in f.message
    assert check(laid(rank_job(8, 8), from_fixture([*toml, "--training.global_batch_size=128"])), "LAY004") == []


def test_torchtitan_pipeline_microbatches_divide_the_local_batch() -> None:
    toml = [
        "torchrun",
        "-m",
        "torchtitan.train",
        "--job.config_file",
        str(FIXTURES / "torchtitan_llama4_17bx128e.toml"),
    ]
    assert check(laid(rank_job(8, 8), from_fixture(toml)), "LAY004") == []
    lay = from_fixture([*toml, "--parallelism.pipeline_parallel_microbatch_size", "2"])
    f = only(check(laid(rank_job(8, 8), lay), "LAY004"))
    assert "local_batch_size 1 % pipeline_parallel_microbatch_size 2 = 1" in f.message


def test_layout_placement_says_where_the_hosts_come_from() -> None:
    """layout.placement: given by the launch (RANK per rank, or a node rank a node), unknown where
    c10d numbers the nodes at its rendezvous (no node rank before the start)."""
    from validator.pipeline import layout_section

    doc = layout_section(laid(rank_job(2, 4), megatron(tp=2)), "check")
    assert doc is not None and doc["placement"]["source"] == "given", doc
    assert doc["placement"]["nodes"] == [{"host": "node001", "node_rank": 0, "ranks": "0-3"},
                                         {"host": "node002", "node_rank": 1, "ranks": "4-7"}]  # fmt: skip
    assert "RANK" in doc["placement"]["rule"]
    per_node = laid(node_job(2, 4, backend="c10d"), megatron(tp=2))
    doc = layout_section([tweak(per_node, i, launch={"node_rank": None})[i] for i in range(2)], "check")
    assert doc is not None and doc["placement"]["source"] == "unknown" and doc["groups"] == {}, doc
    assert "c10d and etcd-v2 number the nodes at their rendezvous" in doc["placement"]["rule"]
