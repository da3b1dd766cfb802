"""The layout read from each framework's own example configuration (tests/fixtures/layout/SOURCE.md):
Megatron scripts run by bash, files read by the agent's own reader, then parsed into LayoutFacts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from validator.agent.probe import CONFIG_MAX, job_configs
from validator.facts import parse
from validator.facts.layout import group_map, parse_explicit, parse_layout, rank_groups
from validator.model import LayoutFacts

FIXTURES = Path(__file__).parent.parent / "fixtures" / "layout"
PRINT_ARGV = f'torchrun() {{ {sys.executable} -c "import json, sys; print(json.dumps(sys.argv[1:]))" torchrun "$@"; }}'


def script_argv(name: str, *args: str) -> list[str]:
    """The command line a Megatron example script builds, from bash itself."""
    bash = shutil.which("bash")
    assert bash
    out = subprocess.run([bash, "-c", f'{PRINT_ARGV}; source "$0" "$@"', str(FIXTURES / name), *args],
                         capture_output=True, text=True, check=True, timeout=30).stdout  # fmt: skip
    argv: list[str] = json.loads(out.strip().splitlines()[-1])
    return argv


def test_megatron_gpt3_175b_script() -> None:
    argv = script_argv("megatron_gpt3_175b.sh", "/ckpt", "/tb", "vocab.json", "merges.txt", "/data/x")
    assert argv[:3] == ["torchrun", "--nproc_per_node", "8"]
    lay = parse_layout(argv, job_configs(argv), {})
    assert lay is not None and lay["framework"] == "megatron"
    assert lay["degrees"] == {"tp": 8, "pp": 16}
    assert lay["sizes"] == {"layers": 96, "micro_batch": 1, "global_batch": 1536}


def test_megatron_mixtral_script_with_experts() -> None:
    argv = script_argv("megatron_mixtral_8x7b.sh", "/ckpt", "tok.model", "/data/x")
    lay = parse_layout(argv, [], {})
    assert lay is not None
    assert lay["degrees"] == {"tp": 1, "pp": 4, "ep": 8}
    assert (lay["sizes"]["layers"], lay["sizes"]["global_batch"]) == (32, 256)


def agent_layout(argv: list[str]) -> LayoutFacts | None:
    return parse_layout(argv, job_configs(argv), {})


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib is Python 3.11+")
def test_torchtitan_toml_read_by_the_agent() -> None:
    path = str(FIXTURES / "torchtitan_llama3_70b.toml")
    lay = agent_layout(["torchrun", "--nproc_per_node=8", "-m", "torchtitan.train", "--job.config_file", path])
    assert lay is not None and lay["framework"] == "torchtitan"
    assert lay["degrees"] == {"dp_replicate": 1, "dp_shard": -1, "tp": 8, "pp": 1, "cp": 1}
    assert lay["source"] == f"--job.config_file {path}"
    # the command line overrides the file, as torchtitan's ConfigManager does
    moe = str(FIXTURES / "torchtitan_deepseek_v3_16b.toml")
    lay = agent_layout(["torchrun", "-m", "torchtitan.train", f"--job.config_file={moe}",
                        "--parallelism.pipeline_parallel_degree", "2"])  # fmt: skip
    assert lay is not None
    assert lay["degrees"] == {"dp_replicate": 1, "dp_shard": -1, "tp": 1, "pp": 2, "ep": 8, "etp": 1}


def test_deepspeed_configs_read_by_the_agent() -> None:
    path = str(FIXTURES / "deepspeed_bs8_zero2_gas3.json")
    lay = agent_layout(["deepspeed", "--num_gpus", "8", "train.py", "--deepspeed_config", path])
    assert lay is not None and lay["framework"] == "deepspeed"
    assert lay["sizes"] == {"micro_batch": 8, "grad_acc": 3, "zero_stage": 2}
    lay = agent_layout(["torchrun", "train.py", "--deepspeed", str(FIXTURES / "deepspeed_bsz24_zero2.json")])
    assert lay is not None and lay["sizes"] == {"train_batch": 24, "micro_batch": 3, "zero_stage": 2}


def test_only_layout_keys_leave_the_node(tmp_path: Path) -> None:
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"train_batch_size": "auto", "wandb": {"api_key": "s3cret-value"},
                              "gradient_accumulation_steps": 2}))  # fmt: skip
    configs = job_configs(["python", "train.py", f"--ds_config={ds}"])
    assert "s3cret" not in json.dumps(configs)
    lay = parse_layout([], configs, {})
    assert lay is not None and lay["sizes"] == {"grad_acc": 2}  # "auto": not known before the start


def test_unreadable_files_are_one_line_errors(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_text(" " * (CONFIG_MAX + 1))
    bad = tmp_path / "bad.toml"
    bad.write_text("[parallelism\n")
    argv = ["torchrun", "t.py", "--deepspeed_config", str(tmp_path / "missing.json"), "--ds_config", str(big)]
    errors = [c["error"] for c in job_configs([*argv, "--job.config_file", str(bad)])]
    assert errors[0] == "No such file or directory"
    assert errors[1] == "larger than 256 KiB"
    assert errors[2].startswith(("not TOML", "unreadable: no tomllib"))
    assert all("\n" not in e for e in errors)
    lay = parse_layout(argv, job_configs(argv), {})
    assert lay is not None and lay["framework"] == "unknown" and len(lay["errors"]) == 2


def test_explicit_layout_from_the_environment_wins() -> None:
    argv = ["torchrun", "pretrain_gpt.py", "--tensor-model-parallel-size", "4"]
    lay = parse_layout(argv, [], {"VALIDATOR_LAYOUT": "tp=2,pp=2"})
    assert lay is not None and lay["framework"] == "explicit" and lay["degrees"] == {"tp": 2, "pp": 2}


def test_facts_parse_fills_in_the_layout() -> None:
    raw = {"kind": "raw", "agent_schema": 1, "hostname": "n1", "env": {"WORLD_SIZE": "8", "RANK": "0"},
           "argv": ["torchrun", "x.py", "--pipeline-model-parallel-size=2"]}  # fmt: skip
    lay = parse(raw)["launch"]["layout"]
    assert lay is not None and lay["degrees"] == {"pp": 2}


def test_rank_groups_match_megatrons_own_example() -> None:
    """generate_masked_orthogonal_rank_groups' docstring: sizes [tp 2, dp 3, pp 4], the dp groups."""
    dp = rank_groups([("tp", 2), ("dp", 3), ("pp", 4)], {"dp"})
    assert (dp[0], dp[1], dp[7], len(dp)) == ([0, 2, 4], [1, 3, 5], [19, 21, 23], 8)


def test_group_map_in_megatron_order() -> None:
    lay: LayoutFacts = {"framework": "megatron", "source": "argv", "degrees": {"tp": 2, "pp": 2, "ep": 2},
                        "sizes": {}, "order": "tp-cp-ep-dp-pp", "errors": []}  # fmt: skip
    gm = group_map(lay, 8)
    assert gm is not None
    assert gm["tp"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert gm["dp"] == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert gm["pp"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert gm["ep"] == [[0, 2], [1, 3], [4, 6], [5, 7]]  # expert TP 2 (= TP), EP 2
    assert group_map(lay | {"degrees": {"tp": 3}}, 8) is None


@pytest.mark.parametrize("command", ["check", "preflight"])
def test_bad_layout_option_is_one_line_exit_2(command: str, tmp_path: Path) -> None:
    facts = tmp_path / "f.json"
    facts.write_text("[]")
    args = [str(facts), "--layout", "tp=2,pp=x"] if command == "check" else ["--layout", "tp=2,pp=x", "--", "true"]
    p = subprocess.run([sys.executable, "-m", "validator", command, *args], capture_output=True, text=True,
                       timeout=60, check=False)  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [p.stderr.strip()]
    assert "--layout: pp 'x' is not a whole number" in p.stderr and "Traceback" not in p.stderr


def test_check_layout_option_replaces_the_configured_one(tmp_path: Path) -> None:
    """`validator check --layout` on facts from `validator probe`: the given layout is the one checked."""
    env = {"PATH": "/usr/bin:/bin", "WORLD_SIZE": "8", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511"}
    probe = subprocess.run([sys.executable, "-m", "validator", "probe", "--json", "--", "python3", "pretrain_gpt.py",
                            "--tensor-model-parallel-size", "2"], capture_output=True, text=True, env=env,
                           timeout=120, check=True)  # fmt: skip
    facts = tmp_path / "f.json"
    facts.write_text(probe.stdout)
    doc = json.loads(probe.stdout)
    assert doc["launch"]["layout"]["degrees"] == {"tp": 2}
    p = subprocess.run([sys.executable, "-m", "validator", "check", str(facts), "--select", "LAY", "--format", "json",
                        "--layout", "tp=3"], capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    report = json.loads(p.stdout)
    assert p.returncode == 1, p.stderr
    assert [f["code"] for f in report["findings"]] == ["LAY002"]
    assert report["layout"]["framework"] == "explicit" and report["layout"]["degrees"]["tp"] == 3


def test_an_agent_python_without_tomllib_says_so(tmp_path: Path) -> None:
    """An interpreter older than 3.11, as far as the agent can tell: a tomllib that cannot be imported
    comes first on its path. The agent's reader runs as the node would run it (standard library only)."""
    (tmp_path / "tomllib.py").write_text("raise ImportError('No module named tomllib')\n")
    probe = Path(__file__).parents[2] / "validator" / "agent"
    code = ("import json, sys; from probe import job_configs; "
            "print(json.dumps(job_configs(['torchrun', 'x.py', '--job.config_file', sys.argv[1]])))")  # fmt: skip
    out = subprocess.run([sys.executable, "-S", "-c", code, str(FIXTURES / "torchtitan_llama3_70b.toml")],
                         env={"PYTHONPATH": f"{tmp_path}:{probe}"}, capture_output=True, text=True,
                         timeout=60, check=True).stdout  # fmt: skip
    (entry,) = json.loads(out)
    assert entry["error"] == "unreadable: no tomllib (Python < 3.11)" and entry["values"] == {}
    lay = parse_layout(["torchrun", "x.py"], [entry], {})
    assert lay is not None and lay["errors"] == [
        f"--job.config_file {entry['path']}: unreadable: no tomllib (Python < 3.11)"
    ]


def accelerate_layout(argv: list[str], home: Path) -> LayoutFacts | None:
    """The layout of an `accelerate launch` line, its files read by the agent with HF_HOME=home."""
    return parse_layout(argv, job_configs(argv, {"HF_HOME": str(home)}), {})


def test_accelerate_megatron_lm_config_read_by_the_agent(tmp_path: Path) -> None:
    """accelerate's own Megatron-LM example config: TP 2, PP 2 on 4 processes; the plugin's context
    parallel size, unset there, counts as 1 where the node's accelerate version is not known (the
    test below)."""
    path = str(FIXTURES / "accelerate_megatron_gpt.yaml")
    lay = accelerate_layout(["accelerate", "launch", "--config_file", path, "train.py"], tmp_path)
    assert lay is not None and (lay["framework"], lay["source"]) == ("accelerate", f"--config_file {path}")
    assert lay["degrees"] == {"pp": 2, "tp": 2, "cp": 1, "ep": 1, "etp": 1}
    assert lay["sizes"] == {"machines": 1, "processes": 4} and lay["order"] == "tp-cp-ep-dp-pp"
    # the command line wins over the file (accelerate's _validate_launch_command)
    argv = ["accelerate", "launch", f"--config-file={path}", "--megatron_lm_context_parallel_size", "1",
            "--num_processes=8", "train.py"]  # fmt: skip
    lay = accelerate_layout(argv, tmp_path)
    assert lay is not None and lay["degrees"]["cp"] == 1 and lay["sizes"]["processes"] == 8


def test_accelerate_megatron_context_parallel_follows_the_nodes_accelerate(tmp_path: Path) -> None:
    """The plugin's unset context parallel size is 2 since accelerate 1.13 (MegatronLMPlugin.
    __post_init__), 1 before: read from the version the agent found on the node, 1 when none was
    found (the gate never blocks an older accelerate's valid job). The plugin's environment
    variable, which accelerate's launch writes and a node may export, comes before the default."""
    path = str(FIXTURES / "accelerate_megatron_gpt.yaml")
    argv = ["accelerate", "launch", "--config_file", path, "train.py"]
    configs = job_configs(argv, {"HF_HOME": str(tmp_path)})
    source = f"--config_file {path}"
    for version, cp in ((None, 1), ("1.12.0", 1), ("0.34.2", 1), ("1.13.0", 2), ("1.15.0.dev0", 2), ("2.0", 2)):
        lay = parse_layout(argv, configs, {}, version)
        assert lay is not None and lay["degrees"]["cp"] == cp, version
        assert lay["source"] == (source if cp == 1 else f"{source}; cp=2 is accelerate {version}'s default")
    env = {"MEGATRON_LM_CONTEXT_PARALLEL_SIZE": "1"}
    lay = parse_layout(argv, configs, env, "1.14.0")
    assert lay is not None and lay["degrees"]["cp"] == 1 and lay["source"] == source
    lay = parse_layout(argv, configs, {"MEGATRON_LM_CONTEXT_PARALLEL_SIZE": "4", "MEGATRON_LM_TP_DEGREE": "8"}, None)
    assert lay is not None and (lay["degrees"]["cp"], lay["degrees"]["tp"]) == (4, 2)  # the file's TP wins
    lay = parse_layout(argv, configs, {"MEGATRON_LM_CONTEXT_PARALLEL_SIZE": "two"}, "1.14.0")
    assert lay is not None and lay["errors"] == ["MEGATRON_LM_CONTEXT_PARALLEL_SIZE 'two' is not a whole number"]
    # the whole way: the agent's document, its packages and its environment, read as facts
    raw = {"argv": argv, "configs": configs, "packages": {"accelerate": "1.14.0"}, "env": {}}
    assert parse(raw)["launch"]["layout"]["degrees"]["cp"] == 2
    raw["env"] = env
    assert parse(raw)["launch"]["layout"]["degrees"]["cp"] == 1


def test_accelerate_parallelism_config_and_its_mesh(tmp_path: Path) -> None:
    path = str(FIXTURES / "accelerate_tp_hsdp.yaml")
    lay = accelerate_layout(["accelerate", "launch", "--config_file", path, "train.py", "--lr", "1"], tmp_path)
    assert lay is not None and lay["framework"] == "accelerate"
    assert lay["degrees"] == {"dp_replicate": 2, "dp_shard": 2, "tp": 2, "cp": 1}
    assert lay["sizes"] == {"fsdp_version": 2, "machines": 1, "processes": 8}
    gm = group_map(lay, 8)  # the mesh ["dp_replicate", "dp_shard", "cp", "sp", "tp"]: TP innermost
    assert gm is not None and gm["tp"] == [[0, 1], [2, 3], [4, 5], [6, 7]] and gm["dp"] == [[0, 2, 4, 6], [1, 3, 5, 7]]
    # HSDP: FSDP shards within dp_shard (inner) and replicates across dp_replicate, as init_device_mesh lays them out
    assert gm["dp_shard"] == [[0, 2], [1, 3], [4, 6], [5, 7]] and gm["dp_replicate"] == [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_hsdp_groups_follow_the_device_mesh_and_plain_fsdp_has_none() -> None:
    """torchtitan's dp_shard -1 is what the other degrees leave; the groups are those of torch's
    init_device_mesh over (pp, dp_replicate, dp_shard, cp, tp), row-major."""
    lay: LayoutFacts = {"framework": "torchtitan", "source": "toml", "degrees": {"dp_replicate": 2, "dp_shard": -1,
                        "tp": 2, "pp": 2}, "sizes": {}, "order": "tp-cp-dp-pp", "errors": []}  # fmt: skip
    gm = group_map(lay, 16)  # dp_shard = 16 // (2 x 2 x 2) = 2
    assert gm is not None
    mesh = [[[[p * 8 + r * 4 + s * 2 + t for t in range(2)] for s in range(2)] for r in range(2)] for p in range(2)]
    assert gm["dp_shard"] == sorted(
        [mesh[p][r][0][t], mesh[p][r][1][t]] for p in range(2) for r in range(2) for t in range(2)
    )
    assert gm["dp_replicate"] == sorted(
        [mesh[p][0][s][t], mesh[p][1][s][t]] for p in range(2) for s in range(2) for t in range(2)
    )
    assert gm["pp"] == [[i, i + 8] for i in range(8)]
    fsdp = group_map(lay | {"degrees": {"dp_replicate": 1, "dp_shard": -1, "tp": 2}}, 8)
    assert fsdp is not None and "dp_shard" not in fsdp and fsdp["dp"] == [[0, 2, 4, 6], [1, 3, 5, 7]]


def test_fsdp1_hybrid_shard_groups_need_the_device_count() -> None:
    """torch's _init_intra_and_inter_node_groups: shard groups are new_subgroups(device_count) (consecutive ranks),
    replicate groups the same local index on every node; no map of them without the count or where the world does not
    divide (torch raises there: LAY002); a world of one node's devices is one shard group and nothing to replicate."""
    lay: LayoutFacts = {"framework": "accelerate", "source": "argv", "degrees": {"dp_replicate": 1, "dp_shard": 1},
                        "sizes": {"fsdp_hybrid": 4}, "order": "tp-cp-dp-pp", "errors": []}  # fmt: skip
    gm = group_map(lay, 16, devices=8)
    assert gm is not None and gm["dp_shard"] == [list(range(8)), list(range(8, 16))]
    assert gm["dp_replicate"] == [[i, i + 8] for i in range(8)] and gm["dp"] == [list(range(16))]
    for devices, world in ((None, 16), (8, 12)):
        gm = group_map(lay, world, devices=devices)
        assert gm is not None and "dp_shard" not in gm, (devices, world)
    gm = group_map(lay, 8, devices=8)
    assert gm is not None and gm["dp_shard"] == [list(range(8))] and "dp_replicate" not in gm


def test_explicit_hsdp_words_and_a_replicate_only_toml() -> None:
    """--layout's HSDP words: dp_shard left out is what the others leave (torchtitan's -1); dp beside them is an error.
    A torchtitan TOML with only data_parallel_replicate_degree (dp_shard -1) is HSDP too."""
    lay = parse_explicit("tp=2,dp_replicate=2", "--layout")
    assert lay["errors"] == [] and lay["degrees"] == {"tp": 2, "dp_replicate": 2}
    gm = group_map(lay, 8)
    assert gm is not None and gm["dp_shard"] == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert gm["dp_replicate"] == [[0, 4], [1, 5], [2, 6], [3, 7]] and gm["tp"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert parse_explicit("tp=2,dp=2,dp_shard=2", "--layout")["errors"] == [
        "--layout: dp with dp_shard/dp_replicate: give dp, or the two HSDP axes"
    ]
    titan: LayoutFacts = {"framework": "torchtitan", "source": "toml", "degrees": {"dp_replicate": 2, "tp": 2},
                          "sizes": {}, "order": "tp-cp-dp-pp", "errors": []}  # fmt: skip
    assert group_map(titan, 8) == gm


def test_accelerate_fsdp_template_names_no_layout(tmp_path: Path) -> None:
    """The FSDP template (comments, quoted values): its keys are read, but plain FSDP has no degrees."""
    path = str(FIXTURES / "accelerate_fsdp.yaml")
    argv = ["accelerate", "launch", "--config_file", path, "train.py"]
    (entry,) = job_configs(argv, {"HF_HOME": str(tmp_path)})
    assert entry["values"] == {"distributed_type": "FSDP", "num_processes": "2", "fsdp_sharding_strategy": "FULL_SHARD"}
    assert entry["error"] is None and parse_layout(argv, [entry], {}) is None


def test_accelerate_fsdp1_hybrid_shard_from_the_file_or_the_line(tmp_path: Path) -> None:
    """The same template with HYBRID_SHARD on the launch line (as accelerate's tests/fsdp/test_fsdp.py
    passes --fsdp_sharding_strategy=...), or accelerate's number for it, or in the file: a layout
    (torch's ShardingStrategy value kept); FSDP2 (fsdp_version 2) has no sharding strategy."""
    path = str(FIXTURES / "accelerate_fsdp.yaml")
    for strategy, value in (("HYBRID_SHARD", 4), ("hybrid_shard_zero2", 5), ("4", 4)):
        argv = ["accelerate", "launch", "--config_file", path, f"--fsdp_sharding_strategy={strategy}", "train.py"]
        lay = accelerate_layout(argv, tmp_path)
        assert lay is not None and lay["sizes"] == {"fsdp_hybrid": value, "processes": 2}, strategy
    cfg = tmp_path / "hybrid.yaml"
    cfg.write_text((FIXTURES / "accelerate_fsdp.yaml").read_text().replace("FULL_SHARD", "HYBRID_SHARD"))
    lay = accelerate_layout(["accelerate", "launch", "--config_file", str(cfg), "train.py"], tmp_path)
    assert lay is not None and lay["sizes"]["fsdp_hybrid"] == 4
    argv = ["accelerate", "launch", "--config_file", str(cfg), "--fsdp_version", "2", "train.py"]
    assert accelerate_layout(argv, tmp_path) is None


def test_accelerate_sequence_parallel_config_and_its_groups(tmp_path: Path) -> None:
    """accelerate's own DeepSpeed Ulysses config (sp 2 on 2 processes); over 8 ranks DeepSpeed's SP
    groups are consecutive ranks (parallel_state_sp.py) and data parallel is world // sp."""
    path = str(FIXTURES / "accelerate_sp_deepspeed.yaml")
    lay = accelerate_layout(["accelerate", "launch", "--config_file", path, "train.py"], tmp_path)
    assert lay is not None and lay["degrees"] == {"dp_replicate": 1, "dp_shard": 1, "sp": 2}
    assert lay["sizes"] == {"machines": 1, "processes": 2} and lay["errors"] == []
    gm = group_map(lay, 8)
    assert gm is not None and gm["sp"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert gm["dp"] == [[0, 2, 4, 6], [1, 3, 5, 7]] and set(gm) == {"sp", "dp"}
    argv = ["accelerate", "launch", "--config_file", path, "--parallelism_config_sp_size", "4", "train.py"]
    lay = accelerate_layout(argv, tmp_path)  # the line wins over the file
    assert lay is not None and lay["degrees"]["sp"] == 4 and group_map(lay, 6) is None


def test_accelerate_default_config_only_when_accelerate_reads_it(tmp_path: Path) -> None:
    """commands/launch.py: the default config is read when --config_file is not given, it exists,
    and not --cpu; a --config_file after the script is the script's."""
    (tmp_path / "accelerate").mkdir()
    shutil.copy(FIXTURES / "accelerate_megatron_gpt.yaml", tmp_path / "accelerate" / "default_config.yaml")
    lay = accelerate_layout(["accelerate", "launch", "--num_processes", "8", "train.py"], tmp_path)
    assert lay is not None and lay["source"].startswith("default ") and lay["degrees"]["tp"] == 2
    assert lay["sizes"]["processes"] == 8
    assert job_configs(["accelerate", "launch", "--cpu", "train.py"], {"HF_HOME": str(tmp_path)}) == []
    script_own = ["accelerate", "launch", "train.py", "--config_file", str(FIXTURES / "accelerate_tp_hsdp.yaml")]
    assert [c["option"] for c in job_configs(script_own, {"HF_HOME": str(tmp_path)})] == ["default"]
    assert job_configs(["python", "train.py", "--config_file", "x.yaml"], {"HF_HOME": str(tmp_path)}) == []
    assert accelerate_layout(["accelerate", "launch", "train.py"], tmp_path / "none") is None


def test_accelerate_json_config_and_hostile_yaml(tmp_path: Path) -> None:
    js = tmp_path / "cfg.json"
    js.write_text(json.dumps({"distributed_type": "MEGATRON_LM", "num_processes": 8,
                              "megatron_lm_config": {"megatron_lm_tp_degree": 4}, "aws_secret_access_key": "s3cret"}))  # fmt: skip
    lay = accelerate_layout(["accelerate", "launch", "--config_file", str(js), "t.py"], tmp_path)
    assert lay is not None and lay["degrees"]["tp"] == 4 and lay["sizes"] == {"processes": 8}
    bad = tmp_path / "bad.yaml"
    bad.write_text("distributed_type: MEGATRON_LM\nnum_processes: [8\nmegatron_lm_tp_degree: !!python/name:os\n")
    configs = job_configs(["accelerate", "launch", "--config_file", str(bad), "t.py"], {"HF_HOME": str(tmp_path)})
    assert "s3cret" not in json.dumps(job_configs(["accelerate", "launch", "--config_file", str(js), "t.py"], {}))
    lay = parse_layout(["accelerate", "launch", "--config_file", str(bad), "t.py"], configs, {})
    assert lay is not None and lay["degrees"].get("tp") == 1  # the unsafe tag is not constructed
    assert any("num_processes" in e and "not a whole number" in e for e in lay["errors"])
    assert any("megatron_lm_tp_degree" in e for e in lay["errors"])


def test_torchtitan_pipeline_microbatch_override() -> None:
    path = str(FIXTURES / "torchtitan_llama4_17bx128e.toml")
    lay = agent_layout(["torchrun", "-m", "torchtitan.train", "--job.config_file", path,
                        "--parallelism.pipeline_parallel_microbatch_size=2"])  # fmt: skip
    assert lay is not None and lay["degrees"]["pp"] == 4
    assert lay["sizes"] == {"micro_batch": 1, "pp_micro_batch": 2}
