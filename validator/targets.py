"""Hostlists (``node[001-064]``, SLURM nodelists, ``@file``) and rank ranges, via ClusterShell."""

from __future__ import annotations

import re
from collections.abc import Iterable

from validator import MAX_RANKS as MAX_RANKS  # re-exported: defined there for the facts parser, which needs no folding
from validator.errors import UserError
from validator.safejson import clip, read_text

MAX_HOSTS = 1 << 17  # 131,072 nodes: a hostlist naming more is refused before it is expanded
MAX_HOST_FILE = 16 << 20  # bytes of an @file of hosts
HUGE = 10**12  # counts are capped here: "a trillion or more"
BRACKET = re.compile(r"\[([^\[\]]*)\]")
HOSTLIST = re.compile(r"[A-Za-z0-9._:-]*(?:\[[0-9,/-]+\][A-Za-z0-9._:-]*)*")  # what fold_hosts writes


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


def _span(piece: str) -> int:
    """How many numbers ``7``, ``1-64`` or ``1-64/2`` stands for (a bound: huge when unreadable)."""
    rng, _, step = piece.partition("/")
    lo, _, hi = rng.partition("-")
    ends = [t.strip() for t in (lo, hi or lo, step or "1")]
    if not all(t.isdecimal() for t in ends):
        return 1  # not a range: ClusterShell says what is wrong with it
    if any(len(t) > 18 for t in ends):
        return HUGE
    first, last, every = (int(t) for t in ends)
    return max(0, (last - first) // max(every, 1) + 1)


def count_hosts(expr: str) -> int:
    """An upper bound of the hosts a hostlist names, computed without expanding it."""
    total = 0
    for element in _top_level(expr):
        n = 1
        for body in BRACKET.findall(element):
            n *= sum(_span(p) for p in body.split(","))
            n = min(n, HUGE)
        total += n
    return total


def expand(expr: str) -> list[str]:
    """``gpu-[001-004,7],login1`` -> hosts in the order written (as Slurm lists them, which is what
    SLURM_NODEID indexes), each range expanded by ClusterShell's NodeSet (Slurm's grammar). NodeSet
    alone would sort, putting ``node7`` before ``node001``."""
    from ClusterShell.NodeSet import NodeSet, NodeSetParseError

    if (n := count_hosts(expr)) > MAX_HOSTS:
        many = f"{n:,}" if n < HUGE else "a trillion or more"
        raise UserError(f"hostlist {clip(expr)} names {many} hosts; at most {MAX_HOSTS:,} are accepted")
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
        raise UserError(f"bad hostlist {clip(expr)}: {clip(str(e), 80)}") from None
    return list(dict.fromkeys(out))


def unfold_hosts(text: str) -> list[str]:
    """``fold_hosts``'s text back to names: hostlists expand, names it could not fold are kept
    as written, never handed to ClusterShell (which reads ``a!b`` as ``a`` minus ``b``). A name
    with a comma in it cannot come back whole."""
    pieces = [p for p in text.split(",") if p]
    out: list[str] = []
    i = 0
    while i < len(pieces):
        element, j = pieces[i], i
        joined = element
        while j + 1 < len(pieces) and not HOSTLIST.fullmatch(joined) and joined.count("[") > joined.count("]"):
            j += 1  # the commas of a bracket: node[01,03]
            joined += "," + pieces[j]
        if HOSTLIST.fullmatch(joined):
            element, i = joined, j
        i += 1
        try:
            out += expand(element) if HOSTLIST.fullmatch(element) else [element]
        except UserError:  # a range too large or reversed: as written
            out.append(element)
    return list(dict.fromkeys(out))


def expand_targets(exprs: Iterable[str]) -> list[str]:
    """Hostlists and ``@file`` (one host or hostlist per line, ``#`` comments), order kept."""
    hosts: list[str] = []
    for expr in exprs:
        if expr.startswith("@"):
            path = expr[1:]
            for n, line in enumerate(read_text(path, MAX_HOST_FILE, "host file").splitlines(), 1):
                line = line.split("#", 1)[0].strip()
                if line:
                    try:
                        hosts += expand(line)
                    except UserError as e:
                        raise UserError(e.message, f"{path}:{n}") from None
                    _bound(hosts)
        else:
            hosts += expand(expr)
            _bound(hosts)
    return list(dict.fromkeys(hosts))


def _bound(hosts: list[str]) -> None:
    if len(hosts) > MAX_HOSTS:
        raise UserError(f"the targets name more than {MAX_HOSTS:,} hosts; scan fewer at a time")


PLAIN = re.compile(r"[A-Za-z0-9._-]+")  # a name ClusterShell folds to itself
# Names ClusterShell's grammar reads as written; it misreads others ("a]b" raises, "a,b" is two
# names, "a!b", "a&b", "a*" drop names silently), and the world names hosts, not the user.
FOLDABLE = re.compile(r"[A-Za-z0-9._:-]+")
ALL_FOLDABLE = re.compile(r"[A-Za-z0-9._:\n-]*")  # over "\n".join(names): the usual case at C speed
ONE_NUMBER = re.compile(r"([A-Za-z_.:-]*)([0-9]+)([A-Za-z_.:-]*)")  # gpu00042, node7-ib: folded here first


def fold_hosts(hosts: Iterable[str]) -> str:
    """``node01 node02 node03`` -> ``node[01-03]``. Names with one number are first folded into
    runs here (ClusterShell parsing 12,500 names one by one took 0.13 s of a preflight verdict),
    then ClusterShell folds those runs and every other name as it always does. One plain name
    is itself (a one-node preflight verdict need not load ClusterShell: 3 ms). Names it cannot
    fold (``gpu[1``, ``a]b``, control characters) follow as they are, sorted, comma-joined: the
    JSON report keeps them exact, the human formats escape them (``report.text.visible``)."""
    hosts = set(hosts)
    if len(hosts) == 1 and PLAIN.fullmatch(one := next(iter(hosts))):
        return one
    joined = "\n".join(hosts)
    usual = ALL_FOLDABLE.fullmatch(joined) and joined.count("\n") == len(hosts) - 1  # no name holds a "\n"
    raw = [] if usual else sorted(h for h in hosts if not FOLDABLE.fullmatch(h))
    if raw:
        hosts.difference_update(raw)
        return ",".join([fold_hosts(hosts), *raw] if hosts else raw)
    runs: dict[tuple[str, str], list[str]] = {}
    other: list[str] = []
    for host in hosts:
        m = ONE_NUMBER.fullmatch(host)
        if m:
            runs.setdefault((m[1], m[3]), []).append(m[2])
        else:
            other.append(host)
    if not other and len(runs) == 1:  # one pattern (gpu00000-gpu12499): ClusterShell's own spelling
        (((head, tail), numbers),) = runs.items()
        if len(set(map(len, numbers))) == 1:  # one width: no question of how paddings sort
            ranges = _runs(numbers)
            return f"{head}[{ranges}]{tail}" if "-" in ranges or "," in ranges else f"{head}{ranges}{tail}"
    from ClusterShell.NodeSet import NodeSet  # only here: the common cases above need none of it

    folded = NodeSet.fromlist(sorted(other))
    for (head, tail), numbers in runs.items():
        folded.update(f"{head}[{_runs(numbers)}]{tail}")
    return str(folded)


def _runs(numbers: list[str]) -> str:
    """``["01", "02", "03", "7"]`` -> ``01-03,7``: consecutive numbers of one width (padding)."""
    if len(set(map(len, numbers))) == 1 and "".join(numbers).isascii():
        numbers.sort()  # one width of ASCII digits: text order is number order (sorted at C speed)
    else:
        numbers.sort(key=lambda s: (len(s), int(s)))
    out: list[str] = []
    start = prev = numbers[0]
    for s in numbers[1:]:
        if len(s) != len(prev) or int(s) != int(prev) + 1:
            out.append(start if start == prev else f"{start}-{prev}")
            start = s
        prev = s
    out.append(start if start == prev else f"{start}-{prev}")
    return ",".join(out)


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
    """``0-3,5`` -> [0, 1, 2, 3, 5]; at most ``MAX_RANKS`` ranks."""
    out: list[int] = []
    for part in text.split(","):
        if not part.strip():
            continue
        lo, _, hi = part.partition("-")
        ends = [t.strip() for t in (lo, hi or lo)]
        if not all(t.isdecimal() and len(t) <= 18 for t in ends):
            raise UserError(f"bad rank range {clip(part)} in {clip(text)}")
        first, last = int(ends[0]), int(ends[1])
        if len(out) + last - first + 1 > MAX_RANKS:
            raise UserError(f"rank ranges {clip(text)} name more than {MAX_RANKS:,} ranks")
        out += range(first, last + 1)
    return out
