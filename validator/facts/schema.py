"""Validate a facts document against the TypedDicts in ``validator.model``.

The validator is compiled once from the type hints, so the schema is written in one place. It is
on the coordinator's hot path (12,500 documents in a few seconds), so leaf types are checked
inline and the path of a bad field is only built when something is wrong.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from functools import cache

from validator import FACTS_SCHEMA, MAX_RANKS
from validator.errors import UserError

# typing is imported where the schema is compiled (with the model, which needs it): a participant
# imports this module on every rank's launch path and never compiles the schema (test_lean.py)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeAlias

    from validator import model

Validator: TypeAlias = "Callable[[Any], None]"
LEAVES: dict[Any, tuple[tuple[type, ...], str]] = {
    str: ((str,), "a string"),
    int: ((int,), "an integer"),
    float: ((int, float), "a number"),
    bool: ((bool,), "true or false"),
}


class SchemaError(UserError):
    def __init__(self, message: str, where: str = "", path: tuple[str, ...] = ()) -> None:
        super().__init__(message, where)
        self.path = path

    def under(self, name: str) -> SchemaError:
        return SchemaError(self.message, self.where, (name, *self.path))


def _bad(want: str, got: Any) -> SchemaError:
    shown = repr(got)
    return SchemaError(f"expected {want}, got {type(got).__name__} {shown[:37] + '...' if len(shown) > 40 else shown}")


# Nullable fields added after FACTS_SCHEMA 1: a document that lacks one loads with it null.
ADDED_LATER: dict[str, tuple[str, ...]] = {"Facts": ("ib",), "LaunchFacts": ("layout",), "GpuFacts": ("health",)}

# Leaves are checked inline by exact class (JSON gives exact types; bool is not an int here).
LeafSpec = tuple[frozenset[type], str]


def _leaf(tp: Any, nullable: bool) -> LeafSpec:
    ok, want = LEAVES[tp]
    classes = set(ok) | ({type(None)} if nullable else set())
    return frozenset(classes), want


def _spec(tp: Any, nullable: bool = False) -> LeafSpec | Validator:
    """A leaf spec (checked inline by the container) or a validator function."""
    import typing

    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [o for o in typing.get_args(tp) if o is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"unsupported union {tp}")
        return _spec(inner[0], nullable=True)
    if tp in LEAVES:
        return _leaf(tp, nullable)
    return _container(tp, nullable)


def _check_one(spec: LeafSpec | Validator, x: Any, where: str) -> None:
    if isinstance(spec, tuple):
        if x.__class__ not in spec[0]:
            raise _bad(spec[1], x).under(where)
        return
    try:
        spec(x)
    except SchemaError as e:
        raise e.under(where) from None


def _container(tp: Any, nullable: bool) -> Validator:
    import typing

    origin = typing.get_origin(tp)
    if origin is list or origin is dict:
        item = _spec(typing.get_args(tp)[-1])
        kind, want = (list, "a list") if origin is list else (dict, "an object")

        def container(v: Any) -> None:
            if v is None and nullable:
                return
            if v.__class__ is not kind:
                raise _bad(want, v)
            values = v if isinstance(v, list) else v.values()
            if isinstance(item, tuple) and all(x.__class__ in item[0] for x in values):
                return  # the common case: every item fine, checked in one pass
            pairs = (
                ((f"[{i}]", x) for i, x in enumerate(v)) if isinstance(v, list) else ((str(k), x) for k, x in v.items())
            )
            for where, x in pairs:
                _check_one(item, x, where)

        return container
    if typing.is_typeddict(tp):
        fields = [(name, _spec(t)) for name, t in hints(tp).items()]
        added = ADDED_LATER.get(tp.__name__, ())

        def record(v: Any) -> None:
            if v is None and nullable:
                return
            if v.__class__ is not dict:
                raise _bad("an object", v)
            for name, spec in fields:
                try:
                    x = v[name]
                except KeyError:
                    if name in added:  # a document of an older validator: unknown, as null
                        v[name] = None
                        continue
                    raise SchemaError("missing field", path=(name,)) from None
                if isinstance(spec, tuple):
                    if x.__class__ not in spec[0]:
                        raise _bad(spec[1], x).under(name)
                else:
                    try:
                        spec(x)
                    except SchemaError as e:
                        raise e.under(name) from None

        return record
    raise TypeError(f"unsupported type in facts schema: {tp}")


@cache
def _facts_validator() -> Validator:
    from validator import model  # once: a preflight participant imports this module, never the schema

    return _container(model.Facts, nullable=False)


class _Source:
    """Python source of a function that returns whether a value matches a type, straight-line
    code with no call per field (the coordinator's hot path); anything unexpected, a missing
    field included, makes the caller fall back to the validators above, which say what is wrong."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.consts: dict[str, frozenset[type]] = {}
        self.n = 0

    def name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def emit(self, tp: Any, var: str, pad: str, nullable: bool = False) -> None:
        import typing

        origin = typing.get_origin(tp)
        if origin in (typing.Union, types.UnionType):
            (inner,) = [o for o in typing.get_args(tp) if o is not type(None)]
            self.emit(inner, var, pad, nullable=True)
        elif tp in LEAVES:
            const = self.name("C")
            self.consts[const] = _leaf(tp, nullable)[0]
            self.lines.append(f"{pad}if {var}.__class__ not in {const}: return False")
        elif nullable:
            self.lines.append(f"{pad}if {var} is not None:")
            self.emit(tp, var, pad + "    ")
        elif origin is list or origin is dict:
            item = self.name("x")
            self.lines.append(f"{pad}if {var}.__class__ is not {origin.__name__}: return False")
            self.lines.append(f"{pad}for {item} in {var}{'' if origin is list else '.values()'}:")
            self.emit(typing.get_args(tp)[-1], item, pad + "    ")
        elif typing.is_typeddict(tp):
            self.lines.append(f"{pad}if {var}.__class__ is not dict: return False")
            for field, t in hints(tp).items():
                value = self.name("v")
                self.lines.append(f"{pad}{value} = {var}[{field!r}]")
                self.emit(t, value, pad)
        else:
            raise TypeError(f"unsupported type in facts schema: {tp}")


@cache
def fields_check(fields: tuple[str, ...] | None = None, exact: bool = False) -> Callable[[Any], bool]:
    """``fast(doc)``: whether ``doc`` is an object holding ``fields`` of Facts (all of them when
    None), each matching its type, and, if ``exact``, nothing else; False or an exception means:
    ask ``_facts_validator`` what is wrong (~3x faster than it on a valid document). Straight-line
    code with no call per field; a subset for the preflight's texts (validator/preflight/sections.py)."""
    from validator import model

    types_ = hints(model.Facts)
    src = _Source()
    src.lines.append("    if doc.__class__ is not dict: return False")
    if exact:
        src.lines.append(f"    if len(doc) != {len(fields or types_)}: return False")
    for field in fields or tuple(types_):
        value = src.name("v")
        src.lines.append(f"    {value} = doc[{field!r}]")
        src.emit(types_[field], value, "    ")
    code = "def fast(doc):\n" + "\n".join(src.lines) + "\n    return True\n"
    scope: dict[str, Any] = dict(src.consts)
    exec(compile(code, "<facts schema>", "exec"), scope)  # our own source, from our own type hints
    fast: Callable[[Any], bool] = scope["fast"]
    return fast


@cache
def field_checks() -> dict[str, Callable[[Any], bool]]:
    """For each field of Facts, whether a value matches its type (as ``fields_check``)."""
    from validator import model

    return {name: _field(name) for name in hints(model.Facts)}


@cache
def hints(tp: Any) -> dict[str, Any]:
    """A TypedDict's fields and their types (evaluated once: they are strings in the source)."""
    import typing

    return typing.get_type_hints(tp)


@cache
def _field(name: str) -> Callable[[Any], bool]:
    whole = fields_check((name,), exact=True)
    return lambda v: whole({name: v})


def matches(doc: Any) -> bool:
    """Whether ``doc`` is valid Facts (without saying what is wrong; ``validate_facts`` does).
    What it accepts is nested 7 levels at most in its fields (others are not looked at)."""
    try:
        return fields_check()(doc)
    except (KeyError, TypeError, AttributeError):
        return False


def _dotted(path: tuple[str, ...]) -> str:
    """``network.interfaces[0].mtu``; a name from the input (a key of ``env``) is cut short."""
    cut = [p if len(p) <= 60 else f"{p[:40]}...({len(p):,} characters)" for p in path]
    return "".join(p if p.startswith("[") else f".{p}" for p in cut).lstrip(".")


SIZES = ("rank", "local_rank", "world_size", "local_world_size", "node_rank", "nnodes")


def _bounded(launch: dict[str, Any]) -> None:
    """Ranks and sizes within MAX_RANKS: checks iterate over them, so a tiny file saying
    WORLD_SIZE=10^9 must not reach them."""
    for name in SIZES:
        value = launch[name]
        if value is not None and not -MAX_RANKS <= value <= MAX_RANKS:
            raise SchemaError(f"{value:,} is beyond the largest job this validator checks ({MAX_RANKS:,} ranks)",
                              path=("launch", name))  # fmt: skip


def validate_facts(doc: Any, where: str = "", matched: bool = False) -> model.Facts:
    """Return ``doc`` as Facts, or raise SchemaError naming ``where`` and the field. ``matched``:
    the caller has already seen ``matches(doc)`` hold (the preflight's bounded parse asks it)."""
    facts: model.Facts = doc  # once checked below (a cast without typing)
    if not isinstance(doc, dict):
        raise SchemaError(f"expected a facts object, got {type(doc).__name__}", where)
    schema = doc.get("schema")
    if isinstance(schema, int) and schema > FACTS_SCHEMA:
        raise SchemaError(
            f"facts schema {schema} is newer than this validator understands "
            f"({FACTS_SCHEMA}); upgrade cluster-validator where you run `check`",
            where,
        )
    try:
        if not (matched or matches(doc)):
            _facts_validator()(doc)
        _bounded(doc["launch"])
    except SchemaError as e:
        field = _dotted(e.path)
        host = doc.get("host")
        if isinstance(host, str) and host:  # a file of many documents: say whose field is bad
            field = f"host {host if len(host) <= 60 else host[:40] + '...'}: {field}"
        raise SchemaError(e.message, f"{where}: {field}" if where else field) from None
    return facts
