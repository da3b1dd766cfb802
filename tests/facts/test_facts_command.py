"""Launch commands: every torchrun option spelling, abbreviations, ``--opt=value``, ``python -m
torch.distributed.run``, deepspeed. Where torch is installed, the real torchrun argparse parser
is the oracle: our scan must read the same values from the same argv."""

from __future__ import annotations

import argparse

import pytest

from validator.facts.command import ACCELERATE, DEEPSPEED, TORCHRUN, identify, parse_command


@pytest.fixture(scope="module")
def torchrun_parser() -> argparse.ArgumentParser:
    run = pytest.importorskip("torch.distributed.run")
    return run.get_args_parser()  # type: ignore[no-any-return]


def agree(parser: argparse.ArgumentParser, args: list[str]) -> dict[str, str]:
    """Parse ``args`` (after ``torchrun``) both ways; return our options after checking them."""
    ours = parse_command(["torchrun", *args])
    theirs = vars(parser.parse_args(args))
    actions = {a.dest: a for a in parser._actions}
    assert ours["errors"] == []
    for dest, value in ours["options"].items():
        want, convert = theirs[dest], actions[dest].type
        got = value == "1" if isinstance(want, bool) else convert(value) if callable(convert) else value
        assert got == want, (dest, value, want)
    assert ours["script"] == theirs["training_script"]
    return ours["options"]


def spellings() -> list[tuple[str, str, bool]]:
    return [(dest, s, takes) for dest, (takes, names) in TORCHRUN.items() for s in names]


@pytest.mark.parametrize(("dest", "spelling", "takes_value"), spellings())
def test_every_torchrun_spelling(
    dest: str, spelling: str, takes_value: bool, torchrun_parser: argparse.ArgumentParser
) -> None:
    value = {"start_method": "fork", "numa_binding": "node", "nnodes": "2:4"}.get(dest, "7")
    forms = [[spelling, value], [f"{spelling}={value}"]] if takes_value else [[spelling]]
    known = {s for a in torchrun_parser._actions for s in a.option_strings}
    for form in forms:
        if spelling in known:
            assert agree(torchrun_parser, [*form, "train.py", "--lr", "1"])[dest] == (value if takes_value else "1")
        else:  # torch.distributed.launch-only options, or 2.14 options missing from this torch
            assert parse_command(["torchrun", *form, "train.py"])["options"][dest] == (value if takes_value else "1")


@pytest.mark.parametrize(
    "args",
    [
        ["--nnode", "2", "--nproc_per", "4", "t.py"],
        ["--rdzv-b", "c10d", "--rdzv-e=h:1", "--stand", "t.py"],
        ["--node-r=1", "--master-a", "n1", "--master-p=1234", "t.py"],
        ["--max_r", "3", "-m", "pkg.train", "--epochs", "3"],
        ["--nnodes=2", "--", "t.py", "--nnodes=9"],  # after the script: the script's own args
        ["--no-python", "--nproc-per-node=2", "bash", "-c", "echo $RANK"],
        ["-r", "3", "-t", "3", "--log-dir=/tmp/l", "t.py"],
    ],
)
def test_abbreviations_and_value_forms_match_torchrun(
    args: list[str], torchrun_parser: argparse.ArgumentParser
) -> None:
    agree(torchrun_parser, args)


def test_parsed_values() -> None:
    c = parse_command(["torchrun", "--nnode=2", "--nproc_per", "4", "--rdzv-b", "c10d", "train.py", "--nnodes", "9"])
    assert c["options"] == {"nnodes": "2", "nproc_per_node": "4", "rdzv_backend": "c10d"}
    assert (c["tool"], c["script"], c["errors"]) == ("torchrun", "train.py", [])


def test_ambiguous_and_unknown_options_are_errors(torchrun_parser: argparse.ArgumentParser) -> None:
    c = parse_command(["torchrun", "--master", "n1", "t.py"])
    assert c["errors"] == ["ambiguous option --master: could match master_addr, master_port"]
    assert parse_command(["torchrun", "--bogus", "--nnodes=2", "t.py"])["errors"] == ["unrecognized option --bogus"]
    for bad in (["--master", "n1", "t.py"], ["--bogus", "t.py"]):
        with pytest.raises(SystemExit):
            torchrun_parser.parse_args(bad)


def test_two_spellings_of_one_option_are_not_ambiguous_to_us() -> None:
    """Python 3.11's argparse rejects ``--nproc`` (it matches ``--nproc-per-node`` and
    ``--nproc_per_node``); later Pythons may not. We accept it rather than raise a false alarm."""
    c = parse_command(["torchrun", "--nproc", "4", "t.py"])
    assert (c["options"], c["errors"]) == ({"nproc_per_node": "4"}, [])


def test_missing_value_and_missing_script() -> None:
    assert parse_command(["torchrun", "--nnodes"])["errors"] == [
        "option --nnodes expects a value",
        "torchrun: no training script given",
    ]


@pytest.mark.parametrize(
    ("argv", "tool", "rest"),
    [
        (["/opt/venv/bin/torchrun", "t.py"], "torchrun", ["t.py"]),
        (["python3", "-m", "torch.distributed.run", "--nnodes=2", "t.py"], "torchrun", ["--nnodes=2", "t.py"]),
        (["python3.11", "-u", "-X", "dev", "-m", "torch.distributed.run", "t.py"], "torchrun", ["t.py"]),
        (
            ["python", "-W", "ignore", "-m", "torch.distributed.launch", "--use-env", "t.py"],
            "torchrun",
            ["--use-env", "t.py"],
        ),
        (["python", "-m", "deepspeed.launcher.runner", "t.py"], "deepspeed", ["t.py"]),
        (["python", "-u", "train.py", "--x"], "python", ["train.py", "--x"]),
        (["bash", "run.sh"], "other", ["run.sh"]),
        ([], "other", []),
    ],
)
def test_identify(argv: list[str], tool: str, rest: list[str]) -> None:
    assert identify(argv) == (tool, rest)


def test_python_script_is_recorded() -> None:
    c = parse_command(["python", "-u", "train.py", "--lr", "1"])
    assert (c["tool"], c["script"], c["options"]) == ("python", "train.py", {})


def test_deepspeed_options() -> None:
    c = parse_command(
        [
            "deepspeed",
            "-H",
            "/job/hostfile",
            "--num_gpus=8",
            "--num_nodes",
            "2",
            "--master_addr",
            "n1",
            "--no_local_rank",
            "train.py",
            "--deepspeed_config",
            "ds.json",
        ]
    )
    assert c["options"] == {
        "hostfile": "/job/hostfile",
        "num_gpus": "8",
        "num_nodes": "2",
        "master_addr": "n1",
        "no_local_rank": "1",
    }
    assert (c["script"], c["errors"]) == ("train.py", [])
    assert parse_command(["deepspeed", "--num_acc=4", "t.py"])["options"] == {"num_gpus": "4"}  # alias + abbreviation
    assert set(DEEPSPEED) >= {"include", "exclude", "launcher", "master_port", "node_rank"}


def test_accelerate_flags_are_all_known() -> None:
    """Our scan of `accelerate launch` assumes every unlisted option takes a value: true only while
    every flag of the installed accelerate is listed (the real parser is the oracle)."""
    launch = pytest.importorskip("accelerate.commands.launch")
    parser = launch.launch_command_parser()
    flags = {s for a in parser._actions if a.nargs == 0 and a.dest != "help" for s in a.option_strings}
    listed = {s for takes, names in ACCELERATE.values() if not takes for s in names}
    assert flags <= listed, sorted(flags - listed)


def test_accelerate_launch_options() -> None:
    argv = ["accelerate", "launch", "--multi_gpu", "--mixed_precision", "bf16", "--num-machines=2",
            "--machine_rank", "1", "--main_process_ip", "n1", "--main_process_port", "29600",
            "--num_processes", "16", "--debug", "train.py", "--lr", "1"]  # fmt: skip
    c = parse_command(argv)
    assert (c["tool"], c["script"], c["errors"]) == ("accelerate", "train.py", [])
    assert c["options"] == {"multi_gpu": "1", "mixed_precision": "bf16", "num_machines": "2", "machine_rank": "1",
                            "main_process_ip": "n1", "main_process_port": "29600", "num_processes": "16",
                            "debug": "1"}  # fmt: skip


@pytest.mark.parametrize(
    "wrapper",
    [
        ["apptainer", "exec", "--nv", "-B", "/data:/data", "--env", "A=1", "img.sif"],
        ["singularity", "run", "--cleanenv", "img.sif"],
        ["enroot", "start", "--mount", "/d:/d", "pytorch"],
        ["numactl", "--cpunodebind=0", "-m", "0"],
        ["env", "-u", "PYTHONPATH", "NCCL_DEBUG=INFO", "OMP_NUM_THREADS=8"],
        ["timeout", "-k", "30", "3600", "taskset", "-c", "0-31", "nice", "-n", "5"],
        ["uv", "run", "--python", "3.11", "--"],
        ["conda", "run", "-n", "train", "--no-capture-output"],
        ["/usr/bin/stdbuf", "-oL", "nohup"],
    ],
)
def test_a_launch_is_seen_through_its_wrappers(wrapper: list[str]) -> None:
    """A container, a CPU binding or an environment runs the launch (common under Slurm): its torchrun options are
    the job's, checked as a bare torchrun's are (`apptainer exec img.sif torchrun --node-rank=0` on two nodes once
    passed as an unknown command)."""
    got = parse_command([*wrapper, "torchrun", "--nnodes=2", "--node-rank", "1", "train.py", "--lr", "3"])
    assert (got["tool"], got["options"], got["script"]) == ("torchrun", {"nnodes": "2", "node_rank": "1"}, "train.py")
    assert got["argv"][: len(wrapper)] == wrapper  # what runs is the whole command
    assert identify([*wrapper, "python", "-m", "torch.distributed.run", "x.py"])[0] == "torchrun"


@pytest.mark.parametrize(
    "argv", [["apptainer", "shell", "img.sif"], ["env"], ["env", "A=1"], ["taskset", "-c", "0-3"], ["uv", "sync"]]
)
def test_a_wrapper_without_a_command_is_no_launch(argv: list[str]) -> None:
    assert parse_command(argv)["tool"] == "other"
