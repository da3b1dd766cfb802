"""What a check is, and the read-only view of a whole job that every check receives.

A check is one function decorated with ``@check(code, severity, title)``; its docstring has three
paragraphs (what it checks / why it matters / how to fix), from which ``validator explain`` and
``docs/checks/`` are generated. It yields ``Hit``s naming participants by index; the runner turns
them into findings with ranks and hosts.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from validator.model import Facts, Severity
from validator.profiles import Profile

T = TypeVar("T", bound=Hashable)
R = TypeVar("R")


@dataclass(slots=True)
class Hit:
    message: str
    members: list[int] = field(default_factory=list)  # participant indices
    expected: str | None = None
    actual: str | None = None
    fix: str = ""
    verify: str = ""
    ranks: list[int] | None = None  # explicit culprit ranks (e.g. ranks that never showed up)
    hosts: list[str] | None = None
    severity: Severity | None = None  # override the check's default


CheckFn = Callable[["Job"], Iterable[Hit]]


@dataclass(frozen=True)
class Check:
    code: str
    severity: Severity
    title: str
    fn: CheckFn

    @property
    def doc(self) -> dict[str, str]:
        parts = [p.strip().replace("\n", " ") for p in inspect.cleandoc(self.fn.__doc__ or "").split("\n\n")]
        parts = [" ".join(p.split()) for p in parts] + ["", "", ""]
        return {"what": parts[0], "why": parts[1], "fix": parts[2]}


def check(code: str, severity: Severity, title: str) -> Callable[[CheckFn], Check]:
    def wrap(fn: CheckFn) -> Check:
        return Check(code, severity, title, fn)

    return wrap


def majority(
    values: Iterable[tuple[int, T]], prefer: Callable[[int], bool] | None = None
) -> tuple[T | None, dict[T, list[int]]]:
    """The most common value and every value's members. A tie goes to the group holding a
    preferred member (rank 0 / node 0: the master's view is what the job will use)."""
    groups: dict[T, list[int]] = {}
    for i, v in values:
        groups.setdefault(v, []).append(i)
    if not groups:
        return None, groups
    counts = Counter({v: len(m) for v, m in groups.items()})
    top = counts.most_common()
    best = [v for v, c in top if c == top[0][1]]
    if len(best) > 1 and prefer is not None:
        for v in best:
            if any(prefer(i) for i in groups[v]):
                return v, groups
    return best[0], groups


class Job:
    """All participants' facts, with the groupings checks share, computed once."""

    def __init__(self, facts: list[Facts], profile: Profile | None = None, context: str = "check") -> None:
        self.facts = facts
        self.profile = profile
        self.context = context  # check | preflight | scan
        self._memo: dict[str, Any] = {}

    def memo(self, key: str, compute: Callable[[], R]) -> R:
        """A value several checks share, computed once per job."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]  # type: ignore[no-any-return]

    def __len__(self) -> int:
        return len(self.facts)

    def launch(self, i: int) -> Any:
        return self.facts[i]["launch"]

    def rank(self, i: int) -> int | None:
        r = self.facts[i]["launch"]["rank"]
        return r if isinstance(r, int) else None

    def host(self, i: int) -> str:
        return self.facts[i]["host"]

    def is_reference(self, i: int) -> bool:
        """Rank 0, or node rank 0: whose view wins when peers split evenly."""
        launch = self.facts[i]["launch"]
        return launch["rank"] == 0 or (launch["rank"] is None and launch["node_rank"] == 0)

    def majority(self, members: Iterable[int], key: Callable[[int], T | None]) -> tuple[T | None, dict[T, list[int]]]:
        return majority(((i, v) for i in members if (v := key(i)) is not None), self.is_reference)

    def node_majority(self, key: Callable[[int], T | None]) -> tuple[T | None, dict[T, list[int]]]:
        """Majority of a per-node fact over nodes (not ranks); groups hold every participant of
        the nodes with each value. A tie goes to the node that holds rank 0 / node rank 0, even
        when another of its ranks represents it."""
        reference = self.reference_reps
        values = ((i, v) for i in self.node_reps if (v := key(i)) is not None)
        expected, groups = majority(values, reference.__contains__)
        return expected, {v: [m for i in reps for m in self.node_of(i)] for v, reps in groups.items()}

    @cached_property
    def reference_reps(self) -> frozenset[int]:
        """The node representatives of the nodes that hold a reference participant."""
        return frozenset(self.node_of(i)[0] for i in range(len(self.facts)) if self.is_reference(i))

    @cached_property
    def ranked(self) -> list[int]:
        return [i for i in range(len(self.facts)) if self.rank(i) is not None]

    @cached_property
    def nodes(self) -> dict[tuple[str, int | None], list[int]]:
        """Participants grouped by node: (host, node rank). Per-node facts are compared per node."""
        out: dict[tuple[str, int | None], list[int]] = {}
        for i, f in enumerate(self.facts):
            nr = f["launch"]["node_rank"]
            out.setdefault((f["host"], nr if isinstance(nr, int) else None), []).append(i)
        return out

    def node_of(self, i: int) -> list[int]:
        """Every participant on the same node as participant ``i``."""
        nr = self.facts[i]["launch"]["node_rank"]
        return self.nodes[(self.facts[i]["host"], nr if isinstance(nr, int) else None)]

    @cached_property
    def node_reps(self) -> list[int]:
        """One participant per node (the lowest index)."""
        return [members[0] for members in self.nodes.values()]

    @cached_property
    def hosts(self) -> list[str]:
        return list(dict.fromkeys(f["host"] for f in self.facts))

    @cached_property
    def world_size(self) -> int | None:
        ws, _ = self.majority(range(len(self)), lambda i: self.launch(i)["world_size"])
        return ws

    @cached_property
    def nnodes(self) -> int | None:
        n, _ = self.majority(range(len(self)), lambda i: self.launch(i)["nnodes"])
        if n is None and len(self.hosts) > 0 and self.context == "scan":
            return len(self.hosts)
        return n

    @cached_property
    def multi_node(self) -> bool:
        """Spans several machines (kernel hostnames). Several node ranks, or several Slurm node
        names, on one machine do not count: loopback works there."""
        return len({f["hostname"] for f in self.facts}) > 1

    @cached_property
    def uses_gpus(self) -> bool:
        """A GPU job: some node has GPUs, or the job asks for them (NCCL settings,
        CUDA_VISIBLE_DEVICES, a profile). Otherwise GPU checks stay silent (a CPU/gloo job)."""
        if self.profile and self.profile.gpus_per_node:
            return True
        for f in self.facts:
            cvd = f["env"].get("CUDA_VISIBLE_DEVICES")
            # "" or "-1" hides every GPU: that asks for a CPU job, not a GPU one
            if f["gpus"]["devices"] or (cvd is not None and cvd.strip() and not cvd.strip().startswith("-")):
                return True
            if any(k.startswith("NCCL_") for k in f["env"]):
                return True
            cmd = f["launch"]["command"]
            if cmd and any("nccl" in a.lower() for a in cmd["argv"]):
                return True
        return False

    def who(self, members: list[int]) -> str:
        """``node rank 1 on vm`` for one participant, folded hosts for several."""
        from validator.targets import fold_hosts

        return self.label(members[0]) if len(members) == 1 else fold_hosts(self.host(i) for i in members)

    def label(self, i: int) -> str:
        r = self.rank(i)
        nr = self.launch(i)["node_rank"]
        who = f"rank {r}" if r is not None else f"node rank {nr}" if nr is not None else "participant"
        return f"{who} on {self.host(i)}"


def describe(job: Job, groups: dict[Any, list[int]], by_host: bool = False, limit: int = 3) -> str:
    """``4 on rank 0-2,4; 8 on rank 3`` or, per node, ``535.1 on node[01-63]; 550.5 on node64``."""
    from validator.targets import fold_hosts, fold_ranks

    parts = []
    for value, members in sorted(groups.items(), key=lambda kv: -len(kv[1]))[:limit]:
        ranks = [r for i in members if (r := job.rank(i)) is not None]
        who = f"rank {fold_ranks(ranks)}" if ranks and not by_host else fold_hosts(job.host(i) for i in members)
        parts.append(f"{value} on {who}")
    return "; ".join(parts)


def outliers(groups: dict[T, list[int]], expected: T | None) -> Iterator[tuple[T, list[int]]]:
    for value, members in groups.items():
        if value != expected:
            yield value, members
