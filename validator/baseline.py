"""`validator baseline record`: measure a known-good set of nodes with the node probes (through the
scan's transport, `validator/scan.py`) and write, per hardware type (the GPU model, else the CPU
model), probe and figure, the median and MAD over the nodes into a launch profile's ``baselines``
(docs/profiles.md, "Baselines"). `validator scan --probes --profile` then holds every node to the
baseline of its hardware as well as to its peers (validator/probes/rounds.py).

The profile is edited as text: only its ``baselines`` block is replaced (or appended), so the rest
keeps its comments and layout; comments inside the old block are lost.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from validator.documents import ProbesDoc
    from validator.profiles import Baselines


def measured(doc: ProbesDoc, date: str) -> tuple[Baselines, list[str]]:
    """The baseline over the nodes that gave figures and were not named slow (median, MAD, n), and
    the nodes left out."""
    from validator.probes import judge
    from validator.profiles import BaselineFigure

    values: dict[tuple[str, str, str], list[float]] = {}
    left: list[str] = []
    for row in doc["nodes"]:
        if row["named"] or row["host"] in doc["failed"] or not row["hardware"]:
            left.append(row["host"])
            continue
        for kind in ("compute", "memory"):
            for key, value in row["compute" if kind == "compute" else "memory"].items():
                values.setdefault((row["hardware"], kind, key), []).append(value)
    out: Baselines = {}
    for (hardware, kind, key), got in sorted(values.items()):
        med, mad = judge.spread(got)
        figure = BaselineFigure(float(f"{med:.5g}"), float(f"{mad:.3g}"), len(got), date)
        out.setdefault(hardware, {}).setdefault(kind, {})[key] = figure
    return out, left


def merged(old: Baselines, new: Baselines) -> Baselines:
    """``old`` with every figure of ``new`` put in (a figure not measured again is kept)."""
    out: Baselines = {hw: {kind: dict(figs) for kind, figs in kinds.items()} for hw, kinds in old.items()}
    for hw, kinds in new.items():
        for kind, figs in kinds.items():
            out.setdefault(hw, {}).setdefault(kind, {}).update(figs)
    return out


def quoted(text: str) -> str:
    """A YAML double-quoted scalar: printable ASCII as is, anything else escaped (names come from nodes)."""
    esc = {'"': '\\"', "\\": "\\\\"}
    return '"' + "".join(esc.get(c, c) if " " <= c <= "~" else f"\\U{ord(c):08x}" for c in text) + '"'


def number(value: float) -> str:
    """A YAML float PyYAML reads back as one (it needs a dot: ``1e-05`` would be a string)."""
    text = f"{value:.6g}"
    if "e" in text or "." not in text:
        text = f"{value:.12f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def block(baselines: Baselines) -> str:
    lines = ["baselines:  # `validator baseline record`: per hardware type, probe and figure, over n known-good nodes"]
    for hw in sorted(baselines):
        lines.append(f"  {quoted(hw)}:")
        for kind in sorted(baselines[hw]):
            lines.append(f"    {kind}:")
            for key, f in sorted(baselines[hw][kind].items()):
                extra = (f", n: {f.n}" if f.n else "") + (f', date: "{f.date}"' if f.date else "")
                lines.append(f"      {quoted(key)}: {{median: {number(f.median)}, mad: {number(f.mad)}{extra}}}")
    return "\n".join(lines) + "\n"


def with_block(text: str, new: str) -> str:
    """``text`` (a valid profile, or "") with its top-level ``baselines`` replaced by ``new``, or
    ``new`` appended. Comment and blank lines right after the old block stay (they lead the next key)."""
    import yaml

    node = yaml.compose(text) if text.strip() else None
    lines = text.splitlines(keepends=True)
    for key, value in node.value if isinstance(node, yaml.MappingNode) else []:
        if key.value == "baselines":
            start, end = key.start_mark.line, value.end_mark.line + (value.end_mark.column > 0)
            while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
                end -= 1
            return "".join(lines[:start]) + new + "".join(lines[end:])
    if not text.strip():
        return new
    return text + ("" if text.endswith("\n") else "\n") + "\n" + new


def write_profile(text: str, destination: str) -> None:
    """Write ``text`` next to ``destination``, check it loads as a profile, then put it in place."""
    import os
    import shutil
    import tempfile

    from validator.errors import UserError
    from validator.profiles import load_profile

    folder = os.path.dirname(os.path.abspath(destination))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".baseline-", suffix=".yaml", dir=folder)
    except OSError as e:
        raise UserError(f"cannot write the profile: {e.strerror}", destination) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if os.path.exists(destination):
            shutil.copymode(destination, tmp)
        try:
            load_profile(tmp)
        except UserError as e:  # a bug here, never the user's: say where the text went wrong
            raise UserError(f"the profile written would not load: {e.message}", destination) from None
        os.replace(tmp, destination)
    except OSError as e:
        raise UserError(f"cannot write the profile: {e.strerror}", destination) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def summary(baselines: Baselines, nodes: int, destination: str) -> str:
    from validator.probes.rounds import UNIT
    from validator.report.text import visible

    out = [f"baseline of {nodes} node{'s' if nodes != 1 else ''} written to {visible(destination)}:"]
    for hw, kinds in sorted(baselines.items()):
        for kind, figs in sorted(kinds.items()):
            for key, f in sorted(figs.items()):
                out.append(f"  {visible(hw)}  {kind}  {visible(key)}: median {f.median:.5g} {UNIT.get(kind, '')}, "
                           f"MAD {f.mad:.3g}, n={f.n}")  # fmt: skip
    return "\n".join(out) + "\n"


def record(
    targets: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[TARGET...]", help="the known-good nodes: hostlists (gpu[001-008]) and @FILE (one host per line)"
        ),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option(
            "--profile",
            metavar="FILE",
            help="the launch profile whose baselines are written (in place unless --output)",
        ),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", metavar="FILE", help="write the profile with the baselines here instead"),
    ] = None,
    slurm: Annotated[bool, typer.Option("--slurm", help="the current allocation, through one srun step")] = False,
    slurm_nodes: Annotated[
        str | None, typer.Option("--slurm-nodes", metavar="HOSTLIST", help="with --slurm: only these nodes")
    ] = None,
    partition: Annotated[
        str | None, typer.Option("--partition", metavar="NAME", help="every node of this SLURM partition, over SSH")
    ] = None,
    k8s: Annotated[bool, typer.Option("--k8s", help="the pods -l selects, through kubectl exec")] = False,
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-n", metavar="NAMESPACE", help="with --k8s: the pods' namespace")
    ] = None,
    context: Annotated[
        str | None, typer.Option("--context", metavar="CONTEXT", help="with --k8s: this kubeconfig context")
    ] = None,
    selector: Annotated[
        str | None,
        typer.Option("--selector", metavar="SELECTOR", help="with --k8s: the pods' label selector (also -l)"),
    ] = None,
    local: Annotated[bool, typer.Option("--local", help="this machine, through a local python3")] = False,
    openssh: Annotated[
        bool, typer.Option("--openssh", help="the targets through the system ssh client and its whole config")
    ] = False,
    user: Annotated[
        str | None,
        typer.Option("--user", "-l", metavar="USER", help="remote user; with --k8s: the label selector"),
    ] = None,
    ssh_config: Annotated[
        list[str] | None, typer.Option("--ssh-config", "-F", metavar="FILE", help="ssh_config file(s) to read instead")
    ] = None,
    accept_new_host_keys: Annotated[
        bool, typer.Option("--accept-new-host-keys", help="accept and record unknown host keys")
    ] = False,
    fanout: Annotated[int, typer.Option(metavar="N", help="SSH connections in flight at once")] = 64,
    connect_timeout: Annotated[float, typer.Option(metavar="SECONDS", help="seconds to get an SSH session")] = 10.0,
    timeout: Annotated[float, typer.Option(metavar="SECONDS", help="seconds a program may run, per host")] = 60.0,
    python: Annotated[str, typer.Option(metavar="PATH", help="python interpreter on the nodes")] = "python3",
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="one line per host on stderr as it answers")] = False,
) -> None:
    """Measure known-good nodes with the probes and write the figures per hardware type into a profile.

    `validator scan --probes --profile FILE` then names a node below the baseline of its hardware,
    even alone, as well as a node slower than its peers.
    """
    import datetime
    import sys

    from validator import scan as scanning
    from validator.errors import EXIT_INCOMPLETE, EXIT_INTERRUPTED, UserError
    from validator.profiles import load_profile
    from validator.safejson import read_text

    if not profile and not output:
        raise UserError("give --profile FILE (written in place) or --output FILE (or both)")
    old = load_profile(profile).baselines if profile else {}  # a bad profile: exit 2 before measuring
    text = read_text(profile, 1 << 20, "profile") if profile else ""
    opts = scanning.ScanOptions(
        targets=targets or [], slurm=slurm, slurm_nodes=slurm_nodes, partition=partition, k8s=k8s,
        selector=selector or (user if k8s else None), namespace=namespace, context=context, local=local,
        openssh=openssh, fanout=fanout, connect_timeout=connect_timeout, timeout=timeout, ssh_config=ssh_config,
        user=None if k8s else user, accept_new_host_keys=accept_new_host_keys, python=python, probes=True,
        codes=[], progress=sys.stderr.isatty(), verbose=verbose,
    )  # fmt: skip
    result = scanning.scan(opts)
    if result.interrupted:
        print("validator: interrupted; nothing recorded", file=sys.stderr)
        raise typer.Exit(EXIT_INTERRUPTED)
    if result.failed:
        raise UserError(result.failed)
    doc = result.probes
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    new, left = measured(doc, today) if doc else ({}, [])
    absent = [o.target for o in result.report.outcomes]
    if left or absent:
        print(f"validator: warning: left out of the baseline: {', '.join([*absent, *left])} (unreachable, "
              "no probe figures or slower than the others; see `validator scan --probes`)", file=sys.stderr)  # fmt: skip
    if not new:
        print("validator: error: no node gave probe figures: nothing recorded", file=sys.stderr)
        raise typer.Exit(EXIT_INCOMPLETE)
    destination = output or str(profile)
    write_profile(with_block(text, block(merged(old, new))), destination)
    nodes = len({r["host"] for r in doc["nodes"]} - set(left)) if doc else 0
    sys.stdout.write(summary(new, nodes, str(Path(destination))))
