"""Validate a facts document against the TypedDicts in ``validator.model``.

The validator is compiled once from the type hints, so the schema is written in one place. It is
on the coordinator's hot path (12,500 documents in a few seconds), so leaf types are checked
inline and the path of a bad field is only built when something is wrong.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

from validator import model
from validator.errors import UserError

Validator = Callable[[Any], None]
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
ADDED_LATER: dict[str, tuple[str, ...]] = {"Facts": ("ib",)}

# Leaves are checked inline by exact class (JSON gives exact types; bool is not an int here).
LeafSpec = tuple[frozenset[type], str]


def _leaf(tp: Any, nullable: bool) -> LeafSpec:
    ok, want = LEAVES[tp]
    classes = set(ok) | ({type(None)} if nullable else set())
    return frozenset(classes), want


def _spec(tp: Any, nullable: bool = False) -> LeafSpec | Validator:
    """A leaf spec (checked inline by the container) or a validator function."""
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
        fields = [(name, _spec(t)) for name, t in typing.get_type_hints(tp).items()]
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
    return _container(model.Facts, nullable=False)


def _dotted(path: tuple[str, ...]) -> str:
    return "".join(p if p.startswith("[") else f".{p}" for p in path).lstrip(".")


def validate_facts(doc: Any, where: str = "") -> model.Facts:
    """Return ``doc`` as Facts, or raise SchemaError naming ``where`` and the field."""
    if not isinstance(doc, dict):
        raise SchemaError(f"expected a facts object, got {type(doc).__name__}", where)
    schema = doc.get("schema")
    if isinstance(schema, int) and schema > model.FACTS_SCHEMA:
        raise SchemaError(
            f"facts schema {schema} is newer than this validator understands "
            f"({model.FACTS_SCHEMA}); upgrade cluster-validator where you run `check`",
            where,
        )
    try:
        _facts_validator()(doc)
    except SchemaError as e:
        field = _dotted(e.path)
        host = doc.get("host")
        if isinstance(host, str) and host:  # a file of many documents: say whose field is bad
            field = f"host {host}: {field}"
        raise SchemaError(e.message, f"{where}: {field}" if where else field) from None
    return typing.cast(model.Facts, doc)
