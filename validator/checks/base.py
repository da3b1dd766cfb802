"""What a check is, and the read-only view of a whole job that every check receives.

A check is a finding code (``validator.codes.Code``) with its function, decorated with
``@check(code, severity, title)``; the docstring has three paragraphs (what it checks / why it
matters / how to fix), which become the code's text in ``validator explain`` and ``docs/checks/``.
It yields ``Hit``s naming participants by index; the runner turns them into findings with ranks
and hosts. Each family module lists its checks in its table ``CODES``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain, compress, groupby, repeat
from operator import eq, itemgetter
from typing import TYPE_CHECKING, Any, TypeVar, cast

from validator.codes import Code, paragraphs
from validator.model import Facts, Severity

if TYPE_CHECKING:  # annotations only: profiles load where one is given
    from validator.facts.gpu import GpuEvidence
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
class Check(Code):
    """A finding code and the function over a job's facts that finds it."""

    fn: CheckFn = field(kw_only=True)


def check(code: str, severity: Severity, title: str) -> Callable[[CheckFn], Check]:
    def wrap(fn: CheckFn) -> Check:
        return Check(code, severity, title, *paragraphs(code, fn.__doc__ or ""), fn=fn)

    return wrap


def majority(
    values: Iterable[tuple[int, T]], prefer: Callable[[int], bool] | None = None
) -> tuple[T | None, dict[T, list[int]]]:
    """The most common value and every value's members. A tie goes to the group holding a
    preferred member (rank 0 / node 0: the master's view is what the job will use)."""
    groups: dict[T, list[int]] = {}
    for i, v in values:
        members = groups.get(v)
        if members is None:
            groups[v] = [i]
        else:
            members.append(i)
    if len(groups) <= 1:  # the common case at scale: everyone agrees
        return next(iter(groups), None), groups
    top = max(len(m) for m in groups.values())
    best = [v for v, m in groups.items() if len(m) == top]  # in first-seen order, as before
    if len(best) > 1 and prefer is not None:
        for v in best:
            if any(prefer(i) for i in groups[v]):
                return v, groups
    return best[0], groups


LAUNCH_COLUMNS = (
    "rank", "local_rank", "world_size", "local_world_size", "node_rank", "nnodes", "master_addr", "master_port",
    "mode", "launcher", "command", "nodelist", "invalid",
)  # fmt: skip


SECTIONS = ("launch", "host", "network", "gpus", "env")  # Job.section
NODE_SECTIONS = ("software", "system", "errors")  # Job.node_section: read for one participant a node


FEW = 64  # majority_of: at most this many members outside the majority are placed one by one


def majority_of(
    members: Sequence[int], values: Sequence[T | None], prefer: Callable[[int], bool]
) -> tuple[T | None, dict[T, list[int]]]:
    """``majority`` over values already computed for ``members`` (None: no value), fast at
    100,000 members: counting and the usual handful of groups run at C speed."""
    if values and values.count(values[0]) == len(values):  # everyone agrees: nothing to group
        return (None, {}) if values[0] is None else (values[0], {values[0]: list(members)})
    counts = cast("Counter[T]", Counter(values))
    counts.pop(None, None)  # type: ignore[arg-type]  # values may hold None; groups never do
    if len(counts) > 16:  # many distinct values: one pass beats a pass per value
        return majority(((i, v) for i, v in zip(members, values, strict=True) if v is not None), prefer)
    top = max(counts.values(), default=0)
    best = [v for v, c in counts.items() if c == top]
    if len(best) == 1 and len(values) - top <= FEW:  # one big group: place the few others, at C speed
        few = {v: indices(values, v) for v in counts if v is not best[0]}
        nones = indices(values, None) if sum(counts.values()) < len(values) else []
        big = list(members)
        for p in sorted([p for ps in few.values() for p in ps] + nones, reverse=True):
            del big[p]
        groups = {v: big if v is best[0] else [members[p] for p in few[v]] for v in counts}  # first-seen order
    else:
        groups = {v: list(compress(members, map(eq, values, repeat(v)))) for v in counts}
    for v in best if len(best) > 1 else ():
        if any(prefer(i) for i in groups[v]):
            return v, groups
    return (best[0] if best else None), groups


def indices(values: Sequence[Any], value: Any) -> list[int]:
    """Where ``value`` is in ``values`` (by ==): a search at C speed for each one found."""
    out: list[int] = []
    with suppress(ValueError):
        while True:
            out.append(values.index(value, out[-1] + 1 if out else 0))
    return out


def all_in_range(values: Sequence[Any], bounds: Sequence[Any]) -> bool:
    """Every value and bound an int, and 0 <= value < bound for each: at 100,000 ranks, settled by
    passes at C speed (min, max, types) where a loop over pairs would run in Python."""
    if not values or not set(map(type, values)) == set(map(type, bounds)) == {int}:
        return False
    return bool(min(values) >= 0 and max(values) < min(bounds))


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

    @cached_property
    def launches(self) -> Sequence[Any]:
        """Every participant's launch facts, by index: hot loops over 100,000 ranks read this."""
        return self.section("launch")

    @cached_property
    def ranks(self) -> Sequence[int | None]:
        """Every participant's rank (None when it has none), by index."""
        return self.column("rank")  # int or None: the schema says so

    def launch(self, i: int) -> Any:
        return self.launches[i]

    def rank(self, i: int) -> int | None:
        return self.ranks[i]

    def host(self, i: int) -> str:
        return self.host_list[i]

    @cached_property
    def host_list(self) -> Sequence[str]:
        """Every participant's host, by index."""
        return self.section("host")

    def is_reference(self, i: int) -> bool:
        """Rank 0, or node rank 0: whose view wins when peers split evenly."""
        launch = self.launches[i]
        return bool(launch["rank"] == 0 or (launch["rank"] is None and launch["node_rank"] == 0))

    def majority(self, members: Iterable[int], key: Callable[[int], T | None]) -> tuple[T | None, dict[T, list[int]]]:
        members = members if isinstance(members, (list, range)) else list(members)
        return majority_of(members, list(map(key, members)), self.is_reference)

    def by_node(self, key: Callable[[int], T | None]) -> dict[T, list[int]]:
        """A per-node fact (None: no value) -> every participant of the nodes that have it."""
        out: dict[T, list[int]] = {}
        for i in self.node_reps:
            v = key(i)
            if v is not None:
                out.setdefault(v, []).extend(self.node_of(i))
        return out

    def node_majority(
        self, key: Callable[[int], T | None], section: str | None = None
    ) -> tuple[T | None, dict[T, list[int]]]:
        """Majority of a per-node fact over nodes (not ranks); groups hold every participant of
        the nodes with each value. A tie goes to the node that holds rank 0 / node rank 0, even
        when another of its ranks represents it. ``section``: the one section ``key`` reads, so
        that it runs once per distinct object (``facts.share`` holds equal sections once)."""
        reference, nodes, reps = self.reference_reps, self.node_lists, self.node_reps
        if section is None:
            values = [key(i) for i in reps]
        else:
            ids = self.memo(f"node_ids.{section}", lambda: [id(o) for o in self.node_column(section)])
            once = {k: key(i) for k, i in dict(zip(ids, reps, strict=True)).items()}
            values = list(map(once.__getitem__, ids))
        if values and values[0] is not None and values.count(values[0]) == len(values):
            return values[0], {values[0]: list(range(len(self.facts)))}  # every node agrees
        expected, groups = majority_of(reps, values, reference.__contains__)
        return expected, {v: list(chain.from_iterable(map(nodes.__getitem__, m))) for v, m in groups.items()}

    def node_column(self, name: str) -> list[Any]:
        """A section (``SECTIONS``, ``NODE_SECTIONS``) of each node's representative, by node."""
        if name in NODE_SECTIONS:
            return list(self.node_section(name).values())
        return self.memo(f"node_column.{name}", lambda: list(map(self.section(name).__getitem__, self.node_reps)))

    def node_section(self, name: str) -> dict[int, Any]:
        """Node representative -> its section ``name`` (``NODE_SECTIONS``: read once a node)."""
        return self._node_sections[NODE_SECTIONS.index(name)]

    @cached_property
    def _node_sections(self) -> list[dict[int, Any]]:
        docs = list(map(self.facts.__getitem__, self.node_reps))
        return [dict(zip(self.node_reps, col, strict=True)) for col in _columns(docs, NODE_SECTIONS)]

    @cached_property
    def reference_reps(self) -> frozenset[int]:
        """The node representatives of the nodes that hold a reference participant."""
        nodes, ranks = self.node_lists, self.ranks
        refs = indices(ranks, 0)
        if None in ranks:  # agents without a rank: node rank 0 is the reference
            refs += [
                i for i, (r, n) in enumerate(zip(ranks, self.column("node_rank"), strict=True)) if r is None and n == 0
            ]
        return frozenset(nodes[i][0] for i in refs)

    @cached_property
    def ranked(self) -> list[int]:
        ranks = self.ranks
        return list(range(len(ranks))) if None not in ranks else [i for i, r in enumerate(ranks) if r is not None]

    @cached_property
    def nodes(self) -> dict[tuple[str, int | None], list[int]]:
        """Participants grouped by node: (host, node rank). Per-node facts are compared per node."""
        out: dict[tuple[str, int | None], list[int]] = {}
        at = 0
        # inputs usually list a node's ranks together: runs found at C speed, one lookup a node
        for key, run in groupby(zip(self.host_list, self.column("node_rank"), strict=True)):
            n = len(list(run))
            out.setdefault(key, []).extend(range(at, at + n))
            at += n
        return out

    @staticmethod
    def pick(column: Sequence[R], members: list[int]) -> list[R]:
        """``column``'s values of ``members`` (ascending, as in ``nodes``): a slice when they
        are consecutive, as a node's ranks usually are."""
        first, n = members[0], len(members)
        return list(column[first : first + n]) if members[-1] - first == n - 1 else [column[i] for i in members]

    def node_of(self, i: int) -> list[int]:
        """Every participant on the same node as participant ``i``."""
        return self.node_lists[i]

    @cached_property
    def node_lists(self) -> list[list[int]]:
        """``node_of`` for every participant, by index (one pass instead of a lookup per call)."""
        nodes, at = list(self.nodes.values()), 0
        for members in nodes:  # the usual layout: each node's ranks consecutive, nodes in order
            if members[0] != at or members[-1] != at + len(members) - 1:
                break
            at += len(members)
        else:
            return list(chain.from_iterable(map(repeat, nodes, map(len, nodes))))
        out: list[list[int]] = [[] for _ in self.facts]
        for members in nodes:
            for i in members:
                out[i] = members
        return out

    @cached_property
    def node_reps(self) -> list[int]:
        """One participant per node (the lowest index)."""
        return [members[0] for members in self.nodes.values()]

    @cached_property
    def hosts(self) -> list[str]:
        return list(dict.fromkeys(self.host_list))

    def column(self, field: str) -> Sequence[Any]:
        """One launch field of every participant, by index. The usual fields are read in one
        pass, so each participant's launch facts are visited once (at 100,000 ranks, memory
        latency, not Python, is what a pass per field costs)."""
        if field in LAUNCH_COLUMNS:
            return self._launch_columns[LAUNCH_COLUMNS.index(field)]
        return self.memo(f"column.{field}", lambda: [launch[field] for launch in self.launches])

    def section(self, name: str) -> Sequence[Any]:
        """One top-level field (``SECTIONS``) of every participant, by index: read together in
        one pass, like the launch columns (at 100,000 ranks a facts document is a cold read: checks
        that look at one section of each node index these lists, not the documents)."""
        return self._sections[SECTIONS.index(name)]

    @cached_property
    def _sections(self) -> list[tuple[Any, ...]]:
        return _columns(self.facts, SECTIONS)

    @cached_property
    def _launch_columns(self) -> list[tuple[Any, ...]]:
        return _columns(self.launches, LAUNCH_COLUMNS)

    @cached_property
    def world_sizes(self) -> tuple[int | None, dict[int, list[int]]]:
        """The majority WORLD_SIZE, and the participants of each value."""
        return majority_of(range(len(self)), self.column("world_size"), self.is_reference)

    @cached_property
    def world_size(self) -> int | None:
        return self.world_sizes[0]

    @cached_property
    def nnodes(self) -> int | None:
        n, _ = self.majority(range(len(self)), self.column("nnodes").__getitem__)
        if n is None and len(self.hosts) > 0 and self.context == "scan":
            return len(self.hosts)
        return n

    @cached_property
    def multi_node(self) -> bool:
        """Spans several machines (kernel hostnames). Several node ranks, or several Slurm node
        names, on one machine do not count: loopback works there."""
        first = self.facts[0]["hostname"] if self.facts else ""
        return any(f["hostname"] != first for f in self.facts)

    @cached_property
    def gpu_evidence(self) -> GpuEvidence | None:
        """Why this is a GPU job (``facts.gpu.gpu_evidence``, the rule of ``facts.network.uses_nccl``);
        None: a CPU/gloo job, where GPU checks stay silent."""
        from validator.facts.gpu import gpu_evidence

        return gpu_evidence(self.facts, self.profile.gpus_per_node if self.profile else None)

    @cached_property
    def uses_gpus(self) -> bool:
        """A GPU job (``gpu_evidence``): otherwise GPU checks stay silent (a CPU/gloo job)."""
        return self.gpu_evidence is not None

    def who(self, members: list[int]) -> str:
        """``node rank 1 on vm`` for one participant, folded hosts for several."""
        from validator.targets import fold_hosts

        return self.label(members[0]) if len(members) == 1 else fold_hosts(self.host(i) for i in members)

    def label(self, i: int) -> str:
        r = self.rank(i)
        nr = self.launch(i)["node_rank"]
        who = f"rank {r}" if r is not None else f"node rank {nr}" if nr is not None else "participant"
        return f"{who} on {self.host(i)}"


FOLD_MAX = 256  # describe() names up to this many hosts of a group, and counts a larger one


def describe(job: Job, groups: dict[Any, list[int]], by_host: bool = False, limit: int = 3) -> str:
    """``4 on rank 0-2,4; 8 on rank 3`` or, per node, ``535.1 on node[01-63]; 550.5 on node64``."""
    from validator.targets import fold_hosts, fold_ranks

    parts = []
    for value, members in sorted(groups.items(), key=lambda kv: -len(kv[1]))[:limit]:
        if len(members) > FOLD_MAX * 8 and not by_host:  # the big majority: its size says enough
            who = f"{len(members):,} ranks" if job.ranks[members[0]] is not None else f"{len(members):,} nodes"
            parts.append(f"{value} on {who}")
            continue
        ranks = [r for i in members if (r := job.ranks[i]) is not None] if not by_host else []
        if ranks:
            who = f"rank {fold_ranks(ranks)}"
        else:  # folding 12,000 names costs a quarter second and says less than their number
            hosts = set(map(job.host_list.__getitem__, members))
            who = fold_hosts(hosts) if len(hosts) <= FOLD_MAX else f"{len(hosts):,} hosts"
        parts.append(f"{value} on {who}")
    return "; ".join(parts)


def outliers(groups: dict[T, list[int]], expected: T | None) -> Iterator[tuple[T, list[int]]]:
    for value, members in groups.items():
        if value != expected:
            yield value, members


def _columns(rows: Sequence[Any], names: Sequence[str]) -> list[tuple[Any, ...]]:
    """``names`` of every row, one tuple per name, in one pass (a copy into lists: one more touch a value)."""
    if not rows:
        return [() for _ in names]
    return list(zip(*map(itemgetter(*names), rows), strict=True))
