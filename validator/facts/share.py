"""One representation of what the ranks of one node have in common.

In per-rank mode each of a node's ranks sends (or writes) its own facts document, and most of it
is the node's: its GPUs, interfaces, versions, limits. ``Shared`` keeps, per host, the first
document's sections; a later document of the same host whose section is equal gets the kept
object instead (a node's 8 ranks then hold one copy, not 8), and where a section differs (per-rank
``gpus.visible``, ``env``) the parts that are equal are shared one level down, dictionary keys
interned (a JSON parser gives every document its own key strings). Across hosts, a section equal
to the previous host's (software, in one image) is that object, and inside sections equal strings
and equal ints, lists and dicts of plain values (an interface, a launch's sources) are held once: the
facts of 100,000 ranks then take 400 MiB, not 550, and checks that group by the object
(``Job.node_majority``) compute once per distinct section. Equality is Python's ``==`` on the
parsed values, at C speed (typed, so that 1 and True stay apart), and documents are never mutated
after loading, so a shared object means exactly what each copy meant.
"""

from __future__ import annotations

from sys import intern
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from validator.model import Facts


SECTIONS = ("gpus", "network", "software", "system", "ib", "errors", "env", "launch", "kind", "validator", "hostname")


DEPTH = 6  # how far into a section its parts are shared across hosts (facts nest 4 deep)


class Shared:
    def __init__(self, across_hosts: bool = True) -> None:
        # across_hosts=False: only a host's own ranks share (the preflight coordinator, where each
        # arrival's walk would cost more than the memory it saves: one document per host there)
        self.across_hosts = across_hosts
        self.kept: dict[str, dict[str, Any]] = {}  # host -> section name -> the object kept
        # across hosts, inside sections: equal strings, and equal lists / dicts of plain values
        # (an interface, a list of IB devices, a launch's sources), held once
        self.values: dict[Any, Any] = {}
        self.ints: dict[int, int] = {}  # only ints (never bool or float, which are == to some int)
        self.last: dict[str, Any] = {}  # section name -> the last host's

    def add(self, facts: Facts) -> Facts:
        """``facts``, its sections replaced by equal ones already held for its host."""
        doc: dict[str, Any] = facts  # type: ignore[assignment]
        kept = self.kept.get(facts["host"])
        if kept is None:
            for name in SECTIONS if self.across_hosts else ():
                if type(doc.get(name)) is dict:
                    section = {intern(k): self._one(v, DEPTH) for k, v in doc[name].items()}
                    last = self.last.get(name)  # hosts in a row with equal sections (software) hold one
                    doc[name] = self.last[name] = last if _same(last, section, DEPTH) else section
            self.kept[facts["host"]] = {name: doc[name] for name in (*SECTIONS, "host") if name in doc}
            return facts
        for name in SECTIONS:
            if name in doc and name in kept:
                doc[name] = _share(doc[name], kept[name])
        doc["host"] = kept["host"]
        return facts

    def _one(self, v: Any, depth: int) -> Any:
        """``v`` with its strings, and its lists and dicts of plain values, replaced by equal ones
        already held; its dictionary keys interned."""
        t = type(v)
        if t is str:
            return self.values.setdefault(v, v)
        if t is int:  # WORLD_SIZE, nnodes, a port, a limit: one object, which checks compare by identity first
            return self.ints.setdefault(v, v)
        if depth <= 0 or (t is not list and t is not dict):
            return v
        if t is list:
            items = [self._one(x, depth - 1) for x in v]
            types = tuple(map(type, items))
            return self.values.setdefault((list, types, *items), items) if PLAIN.issuperset(types) else items
        d = {intern(k): self._one(x, depth - 1) for k, x in v.items()}
        types = tuple(map(type, d.values()))  # with the types: 1 == True == 1.0, and must stay apart
        return self.values.setdefault((dict, types, *d.items()), d) if PLAIN.issuperset(types) else d


PLAIN = {str, int, float, bool, type(None)}


def _same(a: Any, b: Any, depth: int) -> bool:
    """Equal, and of the same types throughout (``==`` alone holds 1 and True equal)."""
    if a is b:
        return True
    if type(a) is not type(b) or a != b:
        return False
    if depth <= 0:
        return type(a) not in (dict, list)
    if type(a) is dict:
        return all(_same(x, b[k], depth - 1) for k, x in a.items())
    return type(a) is not list or all(_same(x, y, depth - 1) for x, y in zip(a, b, strict=True))


def _share(mine: Any, theirs: Any) -> Any:
    """``theirs`` when equal to ``mine``; else ``mine`` with interned keys and the values of
    ``theirs`` that are equal (one level down)."""
    if mine is theirs or mine == theirs:
        return theirs
    if type(mine) is not dict or type(theirs) is not dict:
        return mine
    get = theirs.get
    return {intern(k): o if (o := get(k)) == v else v for k, v in mine.items()}
