"""Hostlists (``node[001-064]``, SLURM nodelists, ``@file``) and rank ranges, via ClusterShell."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from validator.errors import UserError


def _top_level(expr: str) -> list[str]:
    """Split on commas outside brackets: ``a[1,3],b`` -> ``a[1,3]``, ``b``."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(expr):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(expr[start:i])
            start = i + 1
    parts.append(expr[start:])
    return [p.strip() for p in parts if p.strip()]


def expand(expr: str) -> list[str]:
    """``gpu-[001-004,7],login1`` -> hosts in the order written (as Slurm lists them, which is what
    SLURM_NODEID indexes), each range expanded by ClusterShell's NodeSet (Slurm's grammar). NodeSet
    alone would sort, putting ``node7`` before ``node001``."""
    from ClusterShell.NodeSet import NodeSet, NodeSetParseError

    out: list[str] = []
    try:
        for element in _top_level(expr):
            head, bracket, rest = element.partition("[")
            body, closing, tail = rest.partition("]")
            if bracket and closing and "[" not in tail:  # one bracket: expand its ranges in order
                for piece in body.split(","):
                    out += list(NodeSet(f"{head}[{piece}]{tail}"))
            else:
                out += list(NodeSet(element))
    except (NodeSetParseError, ValueError) as e:
        raise UserError(f"bad hostlist {expr!r}: {e}") from None
    return list(dict.fromkeys(out))


def expand_targets(exprs: Iterable[str]) -> list[str]:
    """Hostlists and ``@file`` (one host or hostlist per line, ``#`` comments), order kept."""
    hosts: list[str] = []
    for expr in exprs:
        if expr.startswith("@"):
            path = Path(expr[1:])
            try:
                lines = path.read_text().splitlines()
            except OSError as e:
                raise UserError(f"cannot read host file: {e.strerror}", str(path)) from None
            for n, line in enumerate(lines, 1):
                line = line.split("#", 1)[0].strip()
                if line:
                    try:
                        hosts += expand(line)
                    except UserError as e:
                        raise UserError(e.message, f"{path}:{n}") from None
        else:
            hosts += expand(expr)
    return list(dict.fromkeys(hosts))


def fold_hosts(hosts: Iterable[str]) -> str:
    """``node01 node02 node03`` -> ``node[01-03]``."""
    from ClusterShell.NodeSet import NodeSet

    return str(NodeSet.fromlist(sorted(set(hosts))))


def fold_ranks(ranks: Iterable[int]) -> str:
    """[0, 1, 2, 3, 5] -> ``0-3,5``."""
    out: list[str] = []
    run: list[int] = []
    for r in sorted(set(ranks)):
        if run and r == run[-1] + 1:
            run.append(r)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [r]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def expand_ranks(text: str) -> list[int]:
    """``0-3,5`` -> [0, 1, 2, 3, 5]."""
    out: list[int] = []
    for part in text.split(","):
        if not part.strip():
            continue
        lo, _, hi = part.partition("-")
        try:
            out += list(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            raise UserError(f"bad rank range {part!r} in {text!r}") from None
    return out
