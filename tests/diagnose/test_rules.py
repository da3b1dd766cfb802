"""The diagnose rules are one table (validator/diagnose/causes/): every rule is in it once, with the
one signature (Evidence in, causes out), and a rule written but left out of the table fails here."""

from __future__ import annotations

import inspect
import pkgutil
from importlib import import_module

from validator.diagnose import causes
from validator.diagnose import strength as S
from validator.diagnose.causes import CAUSES, RESTATING, Evidence
from validator.diagnose.events import Event, Ident, Role
from validator.diagnose.verdict import decide, gather


def _rule_functions() -> set[object]:
    """Public functions of the rule modules with the rule signature."""
    found = set()
    for mod in pkgutil.iter_modules(causes.__path__):
        module = import_module(f"{causes.__name__}.{mod.name}")
        for name, fn in vars(module).items():
            if inspect.isfunction(fn) and fn.__module__ == module.__name__ and not name.startswith("_"):
                params = list(inspect.signature(fn).parameters.values())
                if [p.annotation for p in params] == ["Evidence"] and fn.__annotations__["return"] == "list[Cause]":
                    found.add(fn)
    return found


def test_every_rule_is_in_the_table_once() -> None:
    assert len(CAUSES) == len(set(CAUSES)) > 30
    assert set(CAUSES) == _rule_functions()
    assert set(RESTATING) <= set(CAUSES)


def test_no_evidence_no_cause() -> None:
    nothing = Evidence(events=[])
    assert {rule.__name__: rule(nothing) for rule in CAUSES} == {rule.__name__: [] for rule in CAUSES}
    assert decide(nothing).primary is None


def _event(kind: str, rank: int, role: Role, text: str, time: float, **data: str) -> Event:
    return Event(kind, role, text, f"rank{rank}.log:1", Ident(rank=rank), time=time, data=dict(data))


def test_gather_runs_every_rule_and_decide_takes_the_strongest() -> None:
    # rank 1 ran out of memory; ranks 0 and 2 only timed out in the collective it never reached
    events = [
        _event("cuda.oom", 1, Role.ORIGIN, "torch.OutOfMemoryError: CUDA out of memory", 10.0),
        _event("coll.watchdog_timeout", 0, Role.SYMPTOM, "Watchdog caught collective operation timeout", 20.0, seq="7"),
        _event("coll.watchdog_timeout", 2, Role.SYMPTOM, "Watchdog caught collective operation timeout", 20.0, seq="7"),
    ]
    ev = Evidence(events=events, file_ranks=[0, 1, 2])
    found = gather(ev)
    assert {c.code for c in found} >= {"DGN009", "COL003"}  # the OOM (origins) and the timeouts (timeouts_only)
    assert all(c.strength in vars(S).values() for c in found)
    d = decide(ev)
    assert d.primary is not None and (d.primary.code, d.primary.culprits) == ("DGN009", [1])
    assert d.primary.confidence == "high" and d.collateral == [0, 2]
