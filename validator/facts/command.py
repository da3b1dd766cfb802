"""Parse a launch command (torchrun, python -m torch.distributed.run, deepspeed, accelerate launch).

Mirrors the launchers' own argparse parsers (their options: ``facts/launchopts.py``, held against
the installed parsers by tests): dash and underscore spellings, ``--opt=value``, unique-prefix
abbreviations (argparse's default), flags versus options that take a value, and the first
positional argument ending the launcher's options.
"""

from __future__ import annotations

import os

from validator.facts import launchopts

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from validator.model import CommandFacts

# name -> (takes a value, spellings), from the one table of every launcher's options
# (facts/launchopts.py). The name is the dest: what torchrun's PET_<DEST> fallback uses.
TORCHRUN = launchopts.spelling_table("torchrun")
DEEPSPEED = launchopts.spelling_table("deepspeed")
# `accelerate launch`: every option is listed, and one a newer release adds is taken to take a
# value unless the table lists it as a flag.
ACCELERATE = launchopts.spelling_table("accelerate")

TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
PYTHONS = ("python", "python3")
PYTHON_OPTS_WITH_VALUE = ("-W", "-X", "--check-hash-based-pycs")  # `python -X dev -m ...`


# Commands that run another command (a container, a CPU binding, an environment): name -> (the subcommand it needs,
# its options that take the next word as their value, the positional words before the command). What follows is
# the launch; an option this table does not know is read as a flag, so at worst the launch stays unknown ("other").
WRAPPERS: dict[str, tuple[tuple[str, ...], frozenset[str], int]] = {
    name: (tuple(sub.split()), frozenset(opts.split()), positional)
    for name, sub, opts, positional in (
        ("env", "", "-u --unset -C --chdir", 0),  # and its NAME=VALUE words
        ("numactl", "", "-C -N -m -i -p -P --physcpubind --cpunodebind --membind --interleave --preferred", 0),
        ("taskset", "", "", 1),  # its CPU mask or list
        ("nice", "", "-n --adjustment", 0),
        ("timeout", "", "-s --signal -k --kill-after", 1),  # its duration
        ("nohup", "", "", 0),
        ("stdbuf", "", "-i -o -e", 0),
        ("apptainer", "exec run", "-B --bind --env --env-file -H --home -o --overlay --pwd -W --workdir --mount "
         "--security --network --network-args --hostname --dns -S --scratch --app", 1),  # its image
        ("enroot", "start", "-r --root -m --mount -e --env -c --conf", 1),  # its container
        ("uv", "run", "--with --python -p --project --directory --env-file --extra --group --package --index "
         "--with-requirements", 0),
        ("poetry", "run", "", 0),
        ("pipenv", "run", "", 0),
        ("conda", "run", "-n --name -p --prefix --cwd", 0),
        ("pixi", "run", "-e --environment --manifest-path", 0),
    )
}  # fmt: skip
WRAPPERS["singularity"] = WRAPPERS["apptainer"]
WRAPPERS["mamba"] = WRAPPERS["micromamba"] = WRAPPERS["conda"]


def unwrap(argv: list[str]) -> list[str]:
    """The command that ``argv``'s wrappers (WRAPPERS, nested up to 8 deep) run: ``apptainer exec --nv img.sif
    torchrun ...`` is ``torchrun ...``; ``argv`` itself where it is no wrapper or its command cannot be found."""
    for _ in range(8):
        spec = WRAPPERS.get(os.path.basename(argv[0])) if argv else None
        if spec is None:
            return argv
        subcommands, takes_value, positional = spec
        rest = argv[1:]
        if subcommands:
            if not rest or rest[0] not in subcommands:
                return argv
            rest = rest[1:]
        while rest and rest[0].startswith("-") and rest[0] != "--":
            rest = rest[2:] if rest[0] in takes_value else rest[1:]
        rest = rest[1:] if rest[:1] == ["--"] else rest
        while os.path.basename(argv[0]) == "env" and rest and "=" in rest[0] and not rest[0].startswith("="):
            rest = rest[1:]
        rest = rest[positional:]
        if not rest:
            return argv
        argv = rest
    return argv


def identify(argv: list[str]) -> tuple[str, list[str]]:
    """Which launcher ``argv`` runs (through its wrappers: ``unwrap``), and its arguments after the launcher itself."""
    argv = unwrap(argv)
    if not argv:
        return "other", []
    prog = os.path.basename(argv[0])
    if prog == "torchrun":
        return "torchrun", argv[1:]
    if prog == "deepspeed":
        return "deepspeed", argv[1:]
    if prog == "accelerate" and argv[1:2] == ["launch"]:
        return "accelerate", argv[2:]
    if prog == "accelerate-launch":
        return "accelerate", argv[1:]
    if prog.startswith(PYTHONS):
        rest = argv[1:]
        while rest and rest[0].startswith("-") and rest[0] != "-m":
            # interpreter flags such as -u, -O; -X/-W take a value unless it is attached (-Xdev)
            rest = rest[2:] if rest[0] in PYTHON_OPTS_WITH_VALUE else rest[1:]
        if len(rest) >= 2 and rest[0] == "-m" and rest[1] in TORCHRUN_MODULES:
            return "torchrun", rest[2:]
        if len(rest) >= 2 and rest[0] == "-m" and rest[1].startswith("deepspeed.launcher"):
            return "deepspeed", rest[2:]
        return "python", rest
    return "other", argv[1:]


def _spellings(table: dict[str, tuple[bool, tuple[str, ...]]]) -> dict[str, str]:
    return {s: dest for dest, (_, names) in table.items() for s in names}


def parse_options(
    args: list[str], table: dict[str, tuple[bool, tuple[str, ...]]], unknown_take_values: bool = False
) -> tuple[dict[str, str], str | None, list[str], list[str]]:
    """argparse-compatible scan: (options, script, script args, errors). With
    ``unknown_take_values`` (a table that lists every flag), an unlisted ``--opt`` takes a value."""
    spell = _spellings(table)
    longs = [s for s in spell if s.startswith("--")]
    options: dict[str, str] = {}
    errors: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        name, eq, inline = arg.partition("=")
        if name not in spell and name.startswith("--"):
            matches = sorted({spell[s] for s in longs if s.startswith(name)})
            if len(matches) == 1:
                name = next(s for s in longs if spell[s] == matches[0])
            elif matches:
                errors.append(f"ambiguous option {name}: could match {', '.join(matches)}")
                i += 1
                continue
        if name not in spell:
            if unknown_take_values and name.startswith("--"):
                i += 1 if eq else 2
                continue
            errors.append(f"unrecognized option {arg}")
            i += 1
            continue
        dest = spell[name]
        takes_value = table[dest][0]
        if not takes_value:
            options[dest] = "1"
            i += 1
        elif eq:
            options[dest] = inline
            i += 1
        elif i + 1 < len(args):
            options[dest] = args[i + 1]
            i += 2
        else:
            errors.append(f"option {name} expects a value")
            i += 1
    script = args[i] if i < len(args) else None
    return options, script, args[i + 1 :], errors


def parse_command(argv: list[str]) -> CommandFacts:
    tool, rest = identify(argv)
    table = {"torchrun": TORCHRUN, "deepspeed": DEEPSPEED, "accelerate": ACCELERATE}.get(tool)
    if table is None:
        script = rest[0] if tool == "python" and rest else None
        return {"tool": tool, "argv": argv, "options": {}, "script": script, "errors": []}
    options, script, _, errors = parse_options(rest, table, unknown_take_values=tool == "accelerate")
    if script is None:
        errors.append(f"{tool}: no training script given")
    return {"tool": tool, "argv": argv, "options": options, "script": script, "errors": errors}
