"""Collective histories of all ranks -> the first place they part, decided by majority.

Used for Flight Recorder dumps (matched by ``collective_seq_id`` per process group) and for
rehearsal traces. The reference at each position is what most ranks did, never rank 0's view:
when rank 0 is the odd one out it is the one named. When the ranks split evenly nobody is named.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

_INTERNAL = ("/torch/", "\\torch\\", "c10d_logger", "/validator/trace.py", "<frozen ", "/runpy.py", "/functools.py")


@dataclass(frozen=True, slots=True)
class Call:
    op: str
    sig: tuple[Any, ...]  # what must agree across ranks (op, shapes, dtypes)
    site: str | None  # user call site "train.py:88"
    index: int  # 1-based number of this call in its process group
    detail: str
    stack: tuple[str, ...] = ()  # "file:line in fn", innermost last
    state: str | None = None


def user_frame(stack: list[str]) -> str | None:
    """The innermost frame outside torch and the recorder: where the user's code called."""
    for frame in reversed(stack):
        path = frame.split(":", 1)[0]
        if not any(s in path for s in _INTERNAL):
            return short_site(frame)
    return None


def short_site(frame: str) -> str:
    """``/abs/path/train.py:88 in main`` -> ``train.py:88`` (relative to cwd when inside it)."""
    loc = frame.split(" in ", 1)[0]
    path, _, line = loc.rpartition(":")
    if os.path.isabs(path):
        rel = os.path.relpath(path)
        path = rel if not rel.startswith("..") else path
    return f"{path}:{line}"


@dataclass(slots=True)
class Divergence:
    group: str
    index: int
    kind: str  # mismatch | stopped | extra | skipped | split
    culprits: list[int]
    majority: list[int]
    expected: Call | None
    actual: dict[int, Call | None] = field(default_factory=dict)
    confident: bool = True
    last: dict[int, Call | None] = field(default_factory=dict)  # culprit's last call before index
    basis: str = "majority"  # majority | missing (no majority: the rank without the call) | branch | none


def _majority(values: dict[int, Any]) -> tuple[Any, list[int], bool, bool]:
    """(value, its ranks, strict majority, unique top)."""
    counts = Counter(values.values())
    top = counts.most_common()
    best, n = top[0]
    unique = len(top) == 1 or top[1][1] < n
    return best, sorted(r for r, v in values.items() if v == best), n * 2 > len(values), unique


def _site_at(hist: dict[int, dict[int, Call]], ranks: list[int], i: int) -> str | None:
    sites = Counter(c.site for r in ranks if (c := hist[r].get(i)) is not None and c.site)
    return sites.most_common(1)[0][0] if sites else None


def _sig_at(hist: dict[int, dict[int, Call]], ranks: list[int], i: int) -> Any:
    sigs = Counter(c.sig if (c := hist[r].get(i)) else None for r in ranks)
    return sigs.most_common(1)[0][0]


def _skip_by_site(hist: dict[int, dict[int, Call]], maj: list[int], r: int, lo: int, hi: int) -> int | None:
    """First position where rank r's call site is the majority's next one: r skipped a call there."""
    for k in range(lo, hi):
        mine = hist[r].get(k)
        here, nxt = _site_at(hist, maj, k), _site_at(hist, maj, k + 1)
        if mine is None or mine.site is None or here is None or mine.site == here:
            continue
        return k if mine.site == nxt else None
    return None


def enclosing_branch(site: str | None) -> str | None:
    """The ``if``/``elif``/``else`` line a call site sits in (read from the source), or None."""
    if not site or ":" not in site:
        return None
    path, _, line = site.rpartition(":")
    if not line.isdecimal() or not os.path.isfile(path):
        return None
    import linecache

    n = int(line)
    text = linecache.getline(path, n)
    indent = len(text) - len(text.lstrip())
    for k in range(n - 1, max(0, n - 200), -1):
        prev = linecache.getline(path, k)
        if not prev.strip() or prev.lstrip().startswith("#"):
            continue
        ind = len(prev) - len(prev.lstrip())
        if ind < indent:
            head = prev.strip()
            return f"{head} ({path}:{k})" if head.startswith(("if ", "elif ", "else")) else None
    return None


def _skip_or_extra(kind: str, expected: Call | None, mine: Call | None) -> str:
    """Histories alone cannot tell a skipped call from an extra one when the majority stopped
    right there; the source can: the call inside a rank-dependent branch is the odd one."""
    if kind not in ("extra", "skipped") or expected is None or mine is None:
        return kind
    exp_branch, my_branch = enclosing_branch(expected.site), enclosing_branch(mine.site)
    if kind == "extra" and exp_branch and not my_branch:
        return "skipped"
    if kind == "skipped" and my_branch and not exp_branch:
        return "extra"
    return kind


def _split(hist: dict[int, dict[int, Call]], ranks: list[int], sigs: dict[int, Any], i: int, group: str) -> Divergence:
    """No majority (two ranks, or an even split). A rank that has no call where the others have
    one did not join (NCCL's desync rule); a call alone inside a rank-dependent branch is the
    likely odd one. Otherwise nobody is named."""
    actual = {r: hist[r].get(i) for r in ranks}
    last = {r: hist[r][max(k for k in hist[r] if k < i)] if any(k < i for k in hist[r]) else None for r in ranks}
    missing = [r for r in ranks if sigs[r] is None]
    present = [r for r in ranks if sigs[r] is not None]
    if missing and len({sigs[r] for r in present}) == 1:
        exp = actual[present[0]]
        return Divergence(group, i, "stopped", missing, present, exp, {r: None for r in missing}, False,
                          {r: last[r] for r in missing}, "missing")  # fmt: skip
    branchy = [r for r in present if (c := actual[r]) is not None and enclosing_branch(c.site)]
    if len(branchy) == 1 and len(present) == len(ranks):
        others = [r for r in ranks if r not in branchy]
        return Divergence(group, i, "mismatch", branchy, others, actual[others[0]], {branchy[0]: actual[branchy[0]]},
                          False, {}, "branch")  # fmt: skip
    return Divergence(group, i, "split", [], [], None, actual, False, last, "none")


def first_divergence(hist: dict[int, dict[int, Call]], group: str = "0") -> Divergence | None:
    """The first position where the ranks' histories disagree, or None."""
    ranks = sorted(hist)
    if len(ranks) < 2:
        return None
    firsts = [min(h) for h in hist.values() if h]
    if not firsts:
        return None
    lo = max(firsts)  # ring buffers: only compare where every rank still has entries
    hi = max(max(h) for h in hist.values() if h)
    for i in range(lo, hi + 1):
        sigs = {r: (c.sig if (c := hist[r].get(i)) else None) for r in ranks}
        if len(set(sigs.values())) == 1:
            continue
        best, maj, strict, unique = _majority(sigs)
        if not unique:
            return _split(hist, ranks, sigs, i, group)
        culprits = [r for r in ranks if sigs[r] != best]
        expected = next((hist[r][i] for r in maj if i in hist[r]), None)
        actual = {r: hist[r].get(i) for r in culprits}
        last = {r: hist[r][max(k for k in hist[r] if k < i)] if any(k < i for k in hist[r]) else None for r in culprits}
        kind = "extra" if best is None else "stopped" if all(a is None for a in actual.values()) else "mismatch"
        index = i
        if kind == "mismatch" and len(culprits) == 1:
            r = culprits[0]
            mine = actual[r]
            if mine is not None and mine.sig == _sig_at(hist, maj, i + 1) and (i + 1) in hist[maj[0]]:
                kind = "skipped"
            elif (nxt := hist[r].get(i + 1)) is not None and nxt.sig == best:
                kind = "extra"
        if len(culprits) == 1:
            kind = _skip_or_extra(kind, expected, actual[culprits[0]])
        if len(culprits) == 1 and kind in ("mismatch", "stopped", "skipped"):
            k = _skip_by_site(hist, maj, culprits[0], lo, i + 1)
            if k is not None:
                kind, index = "skipped", k
                expected = next((hist[r][k] for r in maj if k in hist[r]), expected)
                actual = {culprits[0]: hist[culprits[0]].get(k)}
        return Divergence(group, index, kind, culprits, maj, expected, actual, strict, last)
    return None


def describe(d: Divergence) -> str:
    """One sentence: ``rank 3 skipped all_reduce #41 at train.py:88; ranks 0-2,4-7 called it``."""
    from validator.targets import fold_ranks

    who = f"rank{'s' if len(d.culprits) != 1 else ''} {fold_ranks(d.culprits)}"
    others = f"rank{'s' if len(d.majority) != 1 else ''} {fold_ranks(d.majority)}"
    exp = d.expected
    at = f" at {exp.site}" if exp and exp.site else ""
    if d.kind == "split":
        parts = [
            f"rank {r}: {c.detail + (' at ' + c.site if c.site else '') if c else 'nothing'}"
            for r, c in sorted(d.actual.items())
        ]
        return f"ranks disagree on collective #{d.index} of group {d.group} with no majority ({'; '.join(parts)})"
    if d.kind == "skipped" and exp:
        mine = next(iter(d.actual.values()), None)
        branch = enclosing_branch(exp.site)
        inside = f" (inside `{branch.split(' (')[0]}`)" if branch else ""
        then = f"; its #{d.index} was {mine.op}{' at ' + mine.site if mine and mine.site else ''}" if mine else ""
        return f"{who} skipped {exp.op} #{d.index}{at}{inside}{then}; {others} called it"
    if d.kind == "stopped" and exp:
        last = next(iter(d.last.values()), None)
        was = (
            f" (last call: {last.op} #{last.index}{' at ' + last.site if last.site else ''})"
            if last
            else " (no call before it)"
        )
        return f"{who} never called {exp.op} #{d.index}{at}{was}; {others} called it"
    if d.kind == "extra":
        mine = next((c for c in d.actual.values() if c), None)
        branch = enclosing_branch(mine.site) if mine else None
        where = f" at {mine.site}" if mine and mine.site else ""
        where += f" (inside `{branch.split(' (')[0]}`)" if branch else ""
        what = mine.op if mine else "a collective"
        return f"{who} called an extra {what} as #{d.index}{where} that {others} did not"
    mine = next((c for c in d.actual.values() if c), None)
    got = f"{mine.detail}{' at ' + mine.site if mine and mine.site else ''}" if mine else "nothing"
    return f"{who} called {got} as #{d.index} where {others} called {exp.detail if exp else '?'}{at}"
