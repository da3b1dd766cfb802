"""The table of launcher options (validator/facts/launchopts.py) against the installed launchers'
own parsers: every option has exactly one row, with the parser's spellings, whether it takes a
value, and its default. An option a new release adds fails here until it is classified; a row of
an option the installed release lacks must be listed in OTHER_RELEASES."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from validator.facts import launchopts


def torchrun_parser() -> argparse.ArgumentParser:
    run = pytest.importorskip("torch.distributed.run", reason="torch is not installed")
    return run.get_args_parser()  # type: ignore[no-any-return]


def deepspeed_parser() -> argparse.ArgumentParser:
    """deepspeed builds its parser inside parse_args(): stop it there and take the parser."""
    runner = pytest.importorskip("deepspeed.launcher.runner", reason="deepspeed is not installed")

    class Built(Exception):
        pass

    def stop(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        raise Built(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(argparse.ArgumentParser, "parse_args", stop)
        with pytest.raises(Built) as built:
            runner.parse_args([])
    parser = built.value.args[0]
    assert isinstance(parser, argparse.ArgumentParser)
    return parser


def accelerate_parser() -> argparse.ArgumentParser:
    launch = pytest.importorskip("accelerate.commands.launch", reason="accelerate is not installed")
    return launch.launch_command_parser()  # type: ignore[no-any-return]


PARSERS: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "torchrun": torchrun_parser,
    "deepspeed": deepspeed_parser,
    "accelerate": accelerate_parser,
}


def options(tool: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, argparse.Action]:
    """The parser's options by their table name (the first long spelling, underscored)."""
    for name in [k for k in os.environ if k.startswith("PET_")]:  # torchrun's defaults read PET_*
        monkeypatch.delenv(name)
    out = {}
    for action in PARSERS[tool]()._actions:
        if action.option_strings and action.dest != "help":
            first = next(s for s in action.option_strings if s.startswith("--"))
            out[first[2:].replace("-", "_")] = action
    return out


@pytest.mark.parametrize("tool", PARSERS)
def test_every_option_of_the_installed_launcher_has_one_row(tool: str, monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = options(tool, monkeypatch)
    table = launchopts.OPTIONS[tool]
    other = set(launchopts.OTHER_RELEASES.get(tool, ()))
    assert sorted(set(parsed) - set(table)) == [], f"{tool}: unclassified options: add a row to launchopts"
    assert sorted(set(table) - set(parsed) - other) == [], f"{tool}: rows of options the parser lacks"
    assert sorted(other & set(parsed)) == [], f"{tool}: in the parser now: drop them from OTHER_RELEASES"
    for name, action in parsed.items():
        cls, takes, default = table[name]
        assert cls in (launchopts.JOB, launchopts.NODE, launchopts.FREE), name
        assert set(launchopts.spellings(tool, name)) == set(action.option_strings), name
        assert takes == (action.nargs != 0), name
        # the parser's default, of its type (0 is not False, "0" is not 0)
        assert (type(default), default) == (type(action.default), action.default), name


def test_defaults_the_launcher_fills_in_are_its_documented_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = options("torchrun", monkeypatch)
    for name, value in launchopts.RESOLVED["torchrun"].items():
        action = parsed[name]
        assert action.default is None and f"Defaults to {value}" in str(action.help), name
        assert launchopts.default("torchrun", name) == value


def test_the_check_path_imports_no_launcher() -> None:
    """The table is plain data: importing it (and the checks) must not import torch, deepspeed or
    accelerate, which take seconds."""
    code = "import sys, validator.checks.rank, validator.facts.launchopts; print(sorted({'torch', 'deepspeed', 'accelerate'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("tool", "name", "options", "env", "want"),
    [
        ("torchrun", "nnodes", {"nnodes": "2"}, {}, ("2:2", "2")),
        ("torchrun", "nnodes", {}, {}, ("1:1", "1:1 (the default)")),
        ("torchrun", "nnodes", {}, {"PET_NNODES": "4"}, ("4:4", "4 (PET_NNODES)")),
        ("torchrun", "max_restarts", {"max_restarts": "03"}, {}, (3, "03")),
        ("torchrun", "standalone", {}, {"PET_STANDALONE": "1"}, (True, "set (PET_STANDALONE)")),
        ("torchrun", "standalone", {}, {}, (False, "not set")),
        ("torchrun", "nproc_per_node", {"nproc_per_node": "gpu"}, {}, None),
        ("deepspeed", "num_nodes", {}, {}, None),
        ("deepspeed", "launcher", {}, {"PET_LAUNCHER": "x"}, ("pdsh", "pdsh (the default)")),
        ("accelerate", "num_machines", {}, {}, None),
        ("accelerate", "fsdp_version", {}, {}, None),
        ("accelerate", "rdzv_backend", {}, {}, ("static", "static (the default)")),
    ],
)
def test_effective_values(
    tool: str, name: str, options: dict[str, str], env: dict[str, str], want: tuple[object, str] | None
) -> None:
    assert launchopts.effective(tool, name, options, env) == want
